# tries: what agents' data code does in parallel, in an unattended run whose
#        secrets are masked: multiprocessing.Pool, Queue, Lock and
#        concurrent.futures.ProcessPoolExecutor (POSIX semaphores in the
#        run's own /dev/shm)
# must: work in unattended
# needs: landlock (without it /dev/shm, like every place, opens read-only)
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor


def square(x):
    return x * x


if __name__ == '__main__':
    with multiprocessing.Pool(2) as pool:
        got = sum(pool.map(square, range(10)))
    print('OK Pool' if got == 285 else 'FAIL Pool: %r' % got)
    q, lock = multiprocessing.Queue(), multiprocessing.Lock()
    w = multiprocessing.Process(target=q.put, args=(os.getpid(),))
    w.start()
    with lock:
        got = q.get()
    w.join()
    print('OK Queue and Lock' if got == os.getpid() else 'FAIL Queue: %r' % got)
    with ProcessPoolExecutor(2) as ex:
        got = sum(ex.map(square, range(10)))
    print('OK ProcessPoolExecutor' if got == 285 else 'FAIL executor: %r' % got)
