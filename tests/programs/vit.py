"""A small Vision Transformer: patch embedding by a strided Conv2d, a learned class token and
position embedding (nn.Parameter, trunc_normal_ init), nn.TransformerEncoder of
nn.TransformerEncoderLayer(batch_first=True, norm_first=True, activation="gelu"), trained on
synthetic 8x8 images (a bar, horizontal or vertical) with AdamW and a cosine schedule."""
import sys

import torchlean as torch
from torchlean import nn

torch.manual_seed(0)


def make_bars(n):
    images = 0.3 * torch.randn(n, 1, 8, 8)
    labels = torch.randint(0, 2, (n,))
    where = torch.randint(0, 8, (n,))
    for i in range(n):
        if labels[i] == 0:
            images[i, 0, where[i], :] += 2.0
        else:
            images[i, 0, :, where[i]] += 2.0
    return images, labels


class ViT(nn.Module):
    def __init__(self, patch=4, dim=16, depth=2, heads=2, num_classes=2):
        super().__init__()
        num_patches = (8 // patch) ** 2
        self.patch_embed = nn.Conv2d(1, dim, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))
        layer = nn.TransformerEncoderLayer(d_model=dim, nhead=heads, dim_feedforward=2 * dim,
                                           dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=depth)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)      # (B, patches, dim)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        x = self.encoder(x)
        return self.head(self.norm(x[:, 0]))


x_train, y_train = make_bars(256)
x_test, y_test = make_bars(128)
model = ViT()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
epochs, batch = 8, 32
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
criterion = nn.CrossEntropyLoss()
for epoch in range(epochs):
    model.train()
    perm = torch.randperm(len(x_train))
    for i in range(0, len(x_train), batch):
        idx = perm[i:i + batch]
        loss = criterion(model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    scheduler.step()

model.eval()
with torch.no_grad():
    acc = (model(x_test).argmax(-1) == y_test).float().mean().item()
print(f"last loss {loss.item():.4f} test accuracy {acc:.3f}")
print(f"METRIC accuracy {acc:.4f}")
sys.exit(0 if acc > 0.85 else 1)
