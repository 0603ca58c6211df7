"""Layer `gpu`: per-GPU device accounting and the fragmentation model (FGD), shared by the `deviceshare`
plugin and the packing benchmark. Pure: numpy arrays in, scores and device indices out."""
