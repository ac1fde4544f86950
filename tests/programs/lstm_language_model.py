"""A 2-layer LSTM word-level language model (the word_language_model example's shape):
embedding, nn.LSTM(num_layers=2, dropout), a decoder, truncated BPTT with hidden states
detached between batches, and gradient clipping."""
import math
import sys

import torchlean as torch
from torchlean import nn

torch.manual_seed(0)
corpus = ("the cat sat on the mat . the dog sat on the log . " * 30).split()
vocab = sorted(set(corpus))
word2idx = {w: i for i, w in enumerate(vocab)}
ids = torch.tensor([word2idx[w] for w in corpus], dtype=torch.long)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data[:nbatch * bsz]
    return data.view(bsz, -1).t().contiguous()


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        return (torch.zeros(self.nlayers, bsz, self.nhid),
                torch.zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


train_data = batchify(ids, 4)
bptt = 8
model = RNNModel(len(vocab), 16, 32, 2)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

epoch_losses = []
for epoch in range(6):
    model.train()
    hidden = model.init_hidden(4)
    total, count = 0.0, 0
    for i in range(0, train_data.size(0) - 1, bptt):
        seq_len = min(bptt, train_data.size(0) - 1 - i)
        data, targets = train_data[i:i + seq_len], train_data[i + 1:i + 1 + seq_len].reshape(-1)
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        total += loss.item()
        count += 1
    epoch_losses.append(total / count)
    print(f"epoch {epoch} loss {epoch_losses[-1]:.3f} ppl {math.exp(epoch_losses[-1]):.2f}")

print(f"METRIC final_loss {epoch_losses[-1]:.4f}")
sys.exit(0 if epoch_losses[-1] < epoch_losses[0] / 2 else 1)
