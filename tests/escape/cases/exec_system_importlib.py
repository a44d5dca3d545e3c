# tries: os.system reached through importlib, every name spelled at run time
# must: fail in unattended
# receipt: exec
# control: works in approved
import builtins
imp = builtins.__dict__['__imp' + 'ort__']
lib = imp('import' + 'lib')
osm = lib.import_module('o' + 's')
status = getattr(osm, 'sys' + 'tem')('/bin/echo spawned by system')
# 127: the shell itself could not be started.
if status == 0:
    print('ESCAPED system() ran a shell')
else:
    print('BLOCKED system() returned', status)
