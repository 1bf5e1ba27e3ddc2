"""Hello tinycore: a real computation on the default device (or DEV=...), checked against numpy."""
import numpy as np
from tinycore import Tensor, Device

a = Tensor([[1., 2., 3.], [4., 5., 6.]])
b = Tensor([[6., 5., 4.], [3., 2., 1.]])
out = (a * b + 1).sum(axis=1).numpy()
want = (np.array([[1., 2., 3.], [4., 5., 6.]]) * np.array([[6., 5., 4.], [3., 2., 1.]]) + 1).sum(axis=1)
print(f"device {Device.DEFAULT}: (a*b+1).sum(axis=1) = {out.tolist()}")
np.testing.assert_allclose(out, want, rtol=1e-6)
print("OK: matches numpy")
