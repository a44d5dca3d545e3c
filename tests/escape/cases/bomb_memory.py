# tries: a memory bomb: map 64 MiB blocks until refused or 16 GiB are held,
#        then 32 GiB at once (the suite sets [limits] memory = 512M).
#        Blocks are mapped, not touched, so a failure here costs no RAM.
# must: fail in both
# receipt: none (a limit, not the sandbox: RLIMIT_AS answers ENOMEM)
import mmap
blocks = []
err = None
while len(blocks) < 256:
    try:
        blocks.append(mmap.mmap(-1, 64 << 20))
    except OSError as e:
        err = e
        break
held = len(blocks) * 64
for b in blocks:
    b.close()
if err is None:
    print('ESCAPED held', held, 'MiB')
else:
    print('BLOCKED refused after', held, 'MiB:', type(err).__name__, err.errno)
try:
    mmap.mmap(-1, 32 << 30).close()
    print('ESCAPED mapped 32 GiB at once')
except OSError as e:
    print('BLOCKED 32 GiB at once:', type(e).__name__, e.errno)
