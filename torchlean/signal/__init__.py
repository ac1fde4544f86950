"""torch.signal in torchlean: the window functions live in torchlean.signal.windows."""
