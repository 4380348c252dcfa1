"""Gradients of gradients: what `grad(..., create_graph=True)` and `backward(create_graph=True)`
run.

The first-order engine (autograd.py: apply, _walk) runs every VJP on arrays, off the graph, and
stays as it is. This package adds, beside it:

* GRAPH_VJPS, {op name: graph VJP}: each op's VJP written again with tensor ops, so that it
  records a graph of its own. A graph VJP takes a `_Ctx` (the incoming gradient `c.g`, a Tensor
  with its own graph; the node's saved values and params; `c.input(i)`, the op's input i rebuilt
  as a Tensor on the array the op saved, whose node is the input's node, so the new graph leads
  into the original one; `c.out()`, the output on its saved array, whose node is the node
  itself) and returns one Tensor (or None) per input. An op that saved nothing its formula
  needs raises a GraphError (c.input). Two fused ops save no input but are shift-invariant in
  it: layer_norm (x - mean = x̂ / rstd) and cross_entropy (log softmax = log p) rebuild a
  tensor with the input's node from what they saved, and recompute from it.
* `create_graph_pass(starts, retain_graph, sink=None, keep=None)`: the walk. As _walk: a heap on
  node.seq (newest first, each node once all its users sent their part), the saved arrays'
  version checks (autograd._check_saved), tensor hooks (on the Tensor gradient); unlike it,
  grad mode is on, parts are summed with tensor adds, and a leaf's .grad becomes (or is added
  to, out of place) a Tensor with a graph. An op with no graph VJP is a GraphError naming it.

Where things live: base.py (Ctx, the helpers, the GRAPH_VJPS table), walk.py (the walk), and
one module per family of ops, each with its VJPS dict gathered here: core.py (arithmetic, the
shape ops, matmul/linear, softmax, layer_norm, cross_entropy), elementwise.py (the other
unary and binary math and the activations), reductions.py (var, norms, max/min, prod, cumsum,
logsumexp...), indexing.py (cat/stack, as_strided, gathers and scatters, embedding...),
nn.py (the other fused nn ops and linear algebra) and special_poly.py (ta.special's orthogonal
polynomials and Bessel-type functions, with their derivative ops); function.py holds those of custom
autograd.Function nodes (found by what they are, not by name: the user's backward run again
with a graph).

Importing this package sets autograd's registration slot (`autograd._create_graph_pass`), which
grad() and backward() call when create_graph is True (tinyattn/__init__ imports it).
"""

from .. import autograd
from . import core, elementwise, indexing, nn, reductions, special_poly
from .base import GRAPH_VJPS
from .walk import create_graph_pass

for _family in (core, elementwise, reductions, indexing, nn, special_poly):
    GRAPH_VJPS.update(_family.VJPS)

autograd._create_graph_pass = create_graph_pass

__all__ = ["GRAPH_VJPS", "create_graph_pass"]
