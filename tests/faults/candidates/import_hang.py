"""A compile that never ends: an infinite loop at import.

Verdict: timeout
"""

import torch.nn as nn

while True:
    pass


class ModelNew(nn.Module):
    pass
