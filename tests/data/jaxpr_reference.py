"""Reference jaxprs for tests/autodiff/test_make_jaxpr.cpp, printed by JAX itself.

    pip install jax==0.10.2 && python3 tests/data/jaxpr_reference.py > tests/data/jaxpr_reference.txt

Each case is the same function written with jax.numpy as the C++ test writes it with zenith;
the test compares zn::make_jaxpr's text with the text here, case by case.
"""
import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)
f32, f64 = jnp.float32, jnp.float64
x43 = jnp.ones((4, 3), f32)
w32 = jnp.ones((3, 2), f32)
v3 = jnp.ones((3,), f32)
b3 = jnp.ones((3,), f32)


def mlp_layer(x, w):
    h = jnp.tanh(jnp.matmul(x, w))
    return jnp.sum(h * h)


cases = {
    "tanh_matmul": (lambda x, w: jnp.tanh(jnp.matmul(x, w)), (x43, w32)),
    "sum_exp": (lambda v: jnp.sum(jnp.exp(v) * v), (v3,)),
    "sin": (lambda v: jnp.sin(v), (v3,)),
    "sin_times_2": (lambda v: jnp.sin(v) * 2, (v3,)),
    "views": (lambda x: lax.transpose(x, (1, 0)).reshape(2, 6)[0:1, 1:4], (x43,)),
    "tuple": (
        lambda x: (
            x.astype(jnp.int32),
            jnp.max(x, axis=1),
            jnp.concatenate([x, x], 0),
            jnp.maximum(x, 0.5),
            jnp.sqrt(x),
            jnp.expand_dims(x, 0),
            jnp.sum(x, axis=0, keepdims=True),
        ),
        (x43,),
    ),
    "runtime_layer": (mlp_layer, (x43, w32)),
    "constant": (lambda v: v * b3, (v3,)),
    "float64": (lambda v: jnp.sum(jnp.log1p(v * v)) / 3.0, (jnp.ones((3,), f64),)),
}

for name, (f, args) in cases.items():
    print(f"== {name}")
    print(jax.make_jaxpr(f)(*args))
