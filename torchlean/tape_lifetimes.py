"""When the tape frees a value, a node's saved values or its record: the lifetimes of the Tape.

A mixin of torchlean.tape.Tape (see its module docstring for the rules): releasing a value once
nothing reads it, making it stale while only VJPs need it and recomputing it for them, freeing
a node's saved values when its VJP can no longer run, and forgetting records nothing can read.
The Tape decides what may be recomputed (Tape._recomputable).
"""
from __future__ import annotations

from torchlean.buffer import AnyBuffer
from torchlean.tape_nodes import freed_vjp, holds_memory


class ValueLifetimes:
    """The Tape's methods that free values, saved values and records (self.nodes, self.referenced,
    self.deferred are the Tape's)."""

    def drop_value(self, i: int) -> bool:
        """Release node i's value now if nothing needs it: no unrun VJP reads it, no live view
        aliases it, no Tensor wraps it (`referenced`) and it is not pinned (a borrowed leaf).
        The Session calls this when the last Tensor on the node goes away, so intermediates die
        as early as in PyTorch. A view that goes lets its base go in turn. A value handed out
        (`held`: Tensor.value) is let go, not released: its payload lives while its holders
        reference it. A value only VJPs still read goes too when its op can recompute it (it
        turns `stale`). True if released for good."""
        node = self.nodes[i]
        if node.pinned or node.dropped or node.stale:
            return False
        if node.users:
            base = i
            while not holds_memory(self.nodes[base]):
                base = self.nodes[base].parents[0]
            if self._recomputable(base):
                self._make_stale(base)   # only VJPs read it: they get it recomputed
            return False
        self._drop(i)
        return True


    def _views_free(self, i: int) -> bool:
        """No Tensor wraps a live view made of view i, recursively, and none was handed out."""
        for v in self.nodes[i].views:
            view = self.nodes[v]
            if not view.dropped and (view.held or v in self.referenced
                                     or not self._views_free(v)):
                return False
        return True

    def _make_stale(self, i: int) -> None:
        """Free node i's value; it and its live views are recomputed before a VJP reads them."""
        self.nodes[i].value.release()
        stack = [i]
        while stack:
            node = self.nodes[stack.pop()]
            node.stale = True
            stack.extend(v for v in node.views if not self.nodes[v].dropped)

    def _recompute(self, i: int) -> None:
        """Give stale node i (or the view i of one) its value back, computed again from what the
        op's node keeps, and point its live views at the new memory."""
        nodes = self.nodes
        while not holds_memory(nodes[i]):
            i = nodes[i].parents[0]
        for j in nodes[i].reads:   # what it is computed from may be recomputed itself
            if nodes[j].stale:
                self._recompute(j)
        fresh = nodes[i].recompute(nodes[i].saved)
        stack = [i]
        while stack:   # readers hold the nodes' AnyBuffers: give those the new payload
            node = nodes[stack.pop()]
            node.value.buf, node.value.handle = fresh.buf, fresh.handle
            node.stale = False
            stack.extend(v for v in node.views if not nodes[v].dropped)

    def _drop(self, i: int) -> None:
        """Release node i's value (a view: give up its base, which may then go too)."""
        nodes, referenced = self.nodes, self.referenced
        stack = [i]
        while stack:
            node = nodes[stack.pop()]
            node.dropped = True
            node.stale = False
            if node.owns_value:
                if not node.held:      # a holder's references keep a handed-out payload
                    node.value.release()
                continue
            for p in node.parents:     # a view (a borrowed leaf has no parents)
                base = nodes[p]
                base.users -= 1
                if (not base.users and not base.pinned and not base.dropped
                        and p not in referenced):
                    stack.append(p)

    def free_saved(self, i: int) -> None:
        """Node i's VJP will not run again: release its residuals, let go of the values it read
        (each freed once its last user is done) and make a later differentiation raise."""
        nodes = self.nodes
        node = nodes[i]
        if node.vjp is freed_vjp or node.vjp is None and not node.cleanup and not node.reads:
            return                   # freed already, or nothing kept
        if node.stale and node.users and holds_memory(node):
            self._recompute(i)   # what it is recomputed from is about to go
        if node.vjp is not None:
            if node.vjp is not freed_vjp:   # its parents lose a consumer
                for p in node.parents:
                    if nodes[p].requires_grad:
                        nodes[p].consumers -= 1
            node.vjp = freed_vjp
        node.saved = {}
        for r in node.cleanup:
            r.release()
        node.cleanup = ()
        reads, node.reads = node.reads, ()
        referenced = self.referenced
        for j in reads:   # j has one user less: its value goes with the last
            read = nodes[j]
            read.users -= 1
            if (not read.users and not read.pinned and not read.dropped
                    and j not in referenced):
                self._drop(j)

    def forget(self, i: int) -> None:
        """Drop node i's record once nothing can read it (its value released, its graph freed,
        no Tensor on it, no unrun VJP sending it a gradient). Its id reads back as a shared
        released placeholder, so a loop that never calls Session.step() keeps no record of the
        ops it ran."""
        self.nodes.pop(i, None)

    def hand_out(self, i: int) -> AnyBuffer:
        """Node i's value for a holder outside the tape (Tensor.value): it, and the base a view
        aliases, are never released early or recomputed; when nothing on the tape needs them
        any more the tape lets go and the payload dies with the holder's last reference."""
        nodes = self.nodes
        j = i
        while True:
            nodes[j].held = True
            if holds_memory(nodes[j]):
                break
            j = nodes[j].parents[0]
        return nodes[i].value

    def let_go(self, i: int) -> None:
        """The last Tensor on node i is gone: free what nothing can read any more, as PyTorch's
        reference counts do. An unrun VJP that no Tensor and no consumer can reach will never
        run, so its saved values go, and so, in turn, do its parents' (graph included); values
        and records nothing reads are released and forgotten."""
        if self.deferred is not None:    # a backward pass is running: after it
            self.deferred.append(i)
            return
        nodes = self.nodes
        node = nodes.get(i)
        if (node is not None and (node.vjp is None or node.vjp is freed_vjp) and node.owns_value
                and not node.consumers and not node.users and not node.pinned
                and not node.dropped and not node.stale and i not in self.referenced):
            # the common cases: a value no graph reads (no_grad, or a result nobody
            # differentiates) and an output whose backward already freed what its VJP kept
            if not node.held:
                node.value.release()
            del nodes[i]
            return
        referenced = self.referenced
        stack = [i]
        while stack:
            j = stack.pop()
            node = nodes.get(j)   # None: forgotten already
            if node is None or j in referenced:
                continue
            if not node.consumers and node.vjp is not None and node.vjp is not freed_vjp:
                parents = node.parents
                self.free_saved(j)          # parents lose this consumer, reads a user
                stack.extend(parents)
            if not node.dropped:
                if node.owns_value and not node.users and not node.pinned and not node.stale:
                    # drop_value's common case (a value nothing reads) without its two frames
                    node.dropped = True
                    if not node.held:
                        node.value.release()
                elif not (node.pinned or node.stale
                          or (node.owns_value and node.recompute is None)):
                    # (drop_value keeps a pinned or stale value, and one an unrun VJP reads
                    # that its op cannot recompute, without doing anything: no call for those)
                    self.drop_value(j)
            if node.dropped and not node.consumers and (node.vjp is None
                                                        or node.vjp is freed_vjp):
                if not node.owns_value:
                    stack.extend(node.parents)   # a view's base may have gone with it
                nodes.pop(j, None)   # forget(j), inline

    def is_forgotten(self, i: int) -> bool:
        return 0 <= i < self.nodes.next_id and i not in self.nodes
