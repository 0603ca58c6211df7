"""Layer `packing`: the GPU packing benchmark of the FGD paper on the Alibaba openb trace."""
