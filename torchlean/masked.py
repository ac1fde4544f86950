"""torch.masked's names in torchlean: filled by torchlean.catalog at import (see its docstring)."""
