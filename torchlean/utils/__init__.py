"""torch.utils's layout, for programs that say `torch.utils.data.DataLoader`."""
from torchlean.utils import data

__all__ = ["data"]
