"""torch.signal.windows names in torchlean: filled by torchlean.catalog at import."""
