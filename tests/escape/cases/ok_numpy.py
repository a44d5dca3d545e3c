# tries: numpy, if installed: import it and compute
# must: work in unattended
# needs: numpy
import numpy as np
a = np.arange(12, dtype=float).reshape(3, 4)
print('OK numpy', np.__version__, a.sum() == 66.0 and 'sum right' or 'FAIL sum')
