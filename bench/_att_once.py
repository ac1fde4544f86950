import numpy as np, torchlean as tl
B,H,n,hd=8,8,1024,64; d=H*hd
rng=np.random.default_rng(0)
x=tl.AnyBuffer.from_numpy(rng.uniform(-1,1,(B,n,d)).astype(np.float32))
Ws=[tl.AnyBuffer.from_numpy(rng.uniform(-.05,.05,(d,d)).astype(np.float32)) for _ in range(4)]
g=rng.uniform(-1,1,(B,n,d)).astype(np.float32)
for _ in range(2):
    t=tl.Tape(); ids=[t.leaf(w) for w in Ws]+[t.leaf(x)]
    out=t.multi_head_attention(*ids, num_heads=H, use_flash=True)
    gr=t.backward(out, seed=g, wrt=ids); tl.synchronize(); t.release()
print("ok")
