# tries: scratch work inside TMPDIR: tempfile, a directory tree, a rename,
#        a cache file in XDG_CACHE_HOME, and writing /dev/null
# must: work in unattended
# needs: landlock (without it the filter cannot tell TMPDIR from any other
#        path, so no file can be opened for writing at all)
import io
import os
import pathlib
import tempfile
with tempfile.NamedTemporaryFile('w+', delete=False) as f:
    f.write('scratch')
    name = f.name
print('OK NamedTemporaryFile in TMPDIR' if os.path.dirname(name) == os.environ['TMPDIR']
      else 'FAIL NamedTemporaryFile outside TMPDIR: ' + name)
with tempfile.TemporaryFile() as f:
    f.write(b'x' * 100000)
    f.seek(0)
    print('OK TemporaryFile' if len(f.read()) == 100000 else 'FAIL TemporaryFile')
d = pathlib.Path(tempfile.mkdtemp())
(d / 'a' / 'b').mkdir(parents=True)
pathlib.Path(name).rename(d / 'a' / 'moved')
print('OK tree and rename inside' if (d / 'a' / 'moved').read_text() == 'scratch'
      else 'FAIL read back')
cache = pathlib.Path(os.environ['XDG_CACHE_HOME'], 'lib')
cache.mkdir()
with tempfile.NamedTemporaryFile(dir=cache, delete=False) as f:
    f.write(b'cache')
print('OK cache in XDG_CACHE_HOME')
with io.FileIO(os.devnull, 'w') as f:
    f.write(b'gone')
print('OK /dev/null')
