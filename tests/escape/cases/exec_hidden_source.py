# tries: run source the pre-screen never sees: rot13-encoded, decoded at run
#        time and run through timeit (no eval, exec or compile in the text)
# must: fail in unattended
# receipt: exec
# control: works in approved
import codecs
import timeit
hidden = codecs.decode(
    "vzcbeg fhocebprff\n"
    "gel:\n"
    "    fhocebprff.eha(['/ova/gehr'], purpx=Gehr)\n"
    "    cevag('RFPNCRQ uvqqra fbhepr fgnegrq /ova/gehr')\n"
    "rkprcg BFReebe nf r:\n"
    "    cevag('OYBPXRQ uvqqra fbhepr:', glcr(r).__anzr__, r.reeab)\n", 'rot13')
timeit.timeit(stmt=hidden, number=1)
