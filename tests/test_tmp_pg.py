from hypothesis import given, settings
from test_halo_grad import pooling_grads, _pooling_grad, _scatter_bytes
RESULTS = []

@settings(max_examples=250, deadline=None, database=None)
@given(pooling_grads())
def test_collect(case):
    ours, theirs = _pooling_grad(case)
    mine, xla = _scatter_bytes(ours), _scatter_bytes(theirs)
    tot_m, tot_x = sum(c.wire_bytes for c in ours), sum(c.wire_bytes for c in theirs)
    with open("/tmp/pg.txt", "a") as f:
        f.write(f"{mine}\t{xla}\t{tot_m}\t{tot_x}\t{case}\n")
