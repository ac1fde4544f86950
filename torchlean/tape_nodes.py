"""The tape's records: a Node per recorded op, the NodeTable that holds them by id, and the
placeholder a forgotten node reads back as.

Kept apart from the Tape so that what a node is (its slots and their meaning) reads on one page,
and the Tape's recording, lifetimes and backward each use it from below.
"""
from __future__ import annotations

import numpy as np

from torchlean.buffer import AnyBuffer


class Node:
    """One recorded step: its value, parents, and what its VJP needs."""

    __slots__ = ("name", "value", "requires_grad", "parents", "vjp", "saved", "cleanup",
                 "owns_value", "broadcast", "pinned", "held", "users", "reads", "dropped",
                 "views", "recompute", "stale", "consumers", "versions")

    def __init__(self, name, value, requires_grad, parents=(), vjp=None, saved=None,
                 cleanup=(), owns_value=True, broadcast=False):
        self.name = name
        self.value = value                  # AnyBuffer
        self.requires_grad = requires_grad
        self.parents = parents              # node ids
        self.vjp = vjp                      # (grad, needs, saved) -> [grad or None per parent]
        self.saved = saved if saved is not None else {}
        self.cleanup = cleanup              # residuals this node owns (a tuple)
        self.owns_value = owns_value        # False for borrowed leaves and views
        self.broadcast = broadcast          # parents may need sum_to on their gradients
        self.pinned = True                  # a leaf: never dropped early (see Tape.drop_value)
        self.held = False                   # value handed out (Tensor.value): never dropped early
        self.users = 0                      # unrun VJPs reading the value + live views of it
        self.reads = ()                     # node ids whose values this node's VJP reads
        self.dropped = False                # value released (a view: its base let go)
        self.views = ()                     # ids of the views made of the value (live or not)
        self.recompute = None               # saved -> the value again (ops.yaml recompute)
        self.stale = False                  # value freed until a VJP reading it runs
        self.consumers = 0                  # unrun VJPs that will send this node a gradient
        self.versions = None                # versions of the saved storages at recording


forgotten: list = []   # the shared placeholder of forgotten nodes, made on first use


def forgotten_node() -> Node:
    """A node with a released value, no parents and no gradient: what Tape.forget leaves."""
    if not forgotten:
        value = AnyBuffer.from_numpy(np.zeros(0, np.float32))
        value.release()
        node = Node("forgotten", value, False, owns_value=False)
        node.pinned, node.dropped = False, True
        forgotten.append(node)
    return forgotten[0]


class NodeTable(dict):
    """The tape's nodes by id: a list's interface (ids 0, 1, ... in recording order; len is the
    next id; iteration yields every node in order) over a dict, so a forgotten node's slot goes
    away (memory stays flat in a loop that never calls Session.step()) and reads back as the
    shared released placeholder."""

    __slots__ = ("next_id",)

    def __init__(self):
        super().__init__()
        self.next_id = 0

    def append(self, node) -> None:
        self[self.next_id] = node
        self.next_id += 1

    def __missing__(self, i):
        if i.__class__ is int and 0 <= i < self.next_id:
            return forgotten_node()
        if i.__class__ is int and -self.next_id <= i < 0:
            return self[self.next_id + i]
        raise IndexError(f"node id {i!r} is not on this tape (it has {self.next_id} nodes)")

    def __len__(self) -> int:
        return self.next_id

    def __iter__(self):
        return (self[i] for i in range(self.next_id))

    def __bool__(self) -> bool:
        return self.next_id > 0


def holds_memory(node) -> bool:
    """Is the node's value its own memory or a borrowed leaf's (not a view of another node)?"""
    return node.owns_value or not node.parents


def freed_vjp(grad, needs, saved):
    """The VJP of a node whose saved values a graph-freeing backward already released."""
    raise RuntimeError("backward: this part of the graph was already differentiated and its "
                       "saved values freed by an earlier backward(); pass retain_graph=True to "
                       "the first backward() to differentiate it again")
