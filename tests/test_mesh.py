"""Mesh: validation, device ids, the jax views, and the device-count guard."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from jax.sharding import AxisType

import gspmd_viz as gv


def test_mesh_shape_and_device_ids_are_c_order():
    mesh = gv.Mesh({"x": 2, "y": 4})
    assert mesh.axis_names == ("x", "y") and mesh.sizes == (2, 4) and mesh.size == 8
    assert mesh.device_ids[1, 2] == 6
    assert mesh.coords(6) == {"x": 1, "y": 2}
    assert repr(mesh) == "Mesh(x=2, y=4)"


def test_to_jax_has_auto_axes_on_the_first_devices():
    jm = gv.Mesh({"x": 2, "y": 4}).to_jax()
    assert jm.axis_names == ("x", "y") and jm.axis_types == (AxisType.Auto, AxisType.Auto)
    assert [d.id for d in jm.devices.ravel()] == list(range(8))
    assert gv.Mesh.from_jax(jm) == gv.Mesh({"x": 2, "y": 4})
    explicit = gv.Mesh({"x": 2, "y": 4}).to_jax(explicit={"y"})
    assert explicit.axis_types == (AxisType.Auto, AxisType.Explicit)


def test_huge_meshes_need_no_devices():
    mesh = gv.Mesh({"x": 64, "y": 64})
    assert mesh.size == 4096 and mesh.coords(4095) == {"x": 63, "y": 63}
    abstract = mesh.to_abstract()
    assert abstract.axis_sizes == (64, 64)
    assert gv.Mesh.from_jax(abstract) == mesh


@pytest.mark.parametrize(
    ("axes", "error", "words"),
    [
        ({"x": 0}, ValueError, "positive size"),
        ({"x": -2}, ValueError, "positive size"),
        ({"x": 2.0}, ValueError, "positive size"),
        ({"x": True}, ValueError, "positive size"),
        ({"1x": 2}, ValueError, "identifiers"),
        ({}, TypeError, "non-empty dict"),
        ([("x", 2)], TypeError, "non-empty dict"),
    ],
)
def test_bad_meshes_say_what_is_wrong(axes, error, words):
    with pytest.raises(error, match=words):
        gv.Mesh(axes)


def test_unknown_axis_lists_the_real_ones():
    with pytest.raises(ValueError, match=r"unknown mesh axis 'z'.*\['x', 'y'\]"):
        gv.Mesh({"x": 2, "y": 2}).axis_size("z")


def test_mesh_larger_than_the_process_says_how_to_fix_it():
    mesh = gv.Mesh({"x": 4, "y": 4})
    with pytest.raises(ValueError, match=r"needs 16 devices.*gv.use_cpu_devices\(16\).*restart"):
        mesh.to_jax()
    with pytest.raises(ValueError, match="use_cpu_devices"):
        gv.Sharding(mesh, ("x",)).to_named_sharding()
    # Symbolic work on the same mesh still succeeds.
    assert gv.Sharding(mesh, ("x",)).shard_shape((9,)) == (3,)
    assert mesh.device_ids.shape == (4, 4) and np.all(mesh.device_ids.ravel() == np.arange(16))


def test_mesh_split_falls_back_to_an_abstract_mesh():
    import jax

    mesh = gv.Mesh({"x": 64, "y": 64})
    jaxpr = jax.make_jaxpr(lambda a: gv.mesh_split(a, mesh, ("y", None)))(np.ones((128, 4)))
    assert "sharding_constraint" in str(jaxpr) and "'y'" in str(jaxpr)


@pytest.mark.parametrize("n", [0, -1, 2.5, True])
def test_use_cpu_devices_needs_a_positive_int(n):
    with pytest.raises(ValueError, match="positive whole number"):
        gv.use_cpu_devices(n)


def test_use_cpu_devices_after_jax_started_with_fewer_devices():
    script = textwrap.dedent(
        """
        import jax, gspmd_viz as gv
        jax.numpy.ones(3).block_until_ready()  # the backend starts with 1 CPU device
        gv.use_cpu_devices(1)  # enough: fine
        try:
            gv.use_cpu_devices(8)
        except ValueError as e:
            print("ERROR:", e)
        """
    )
    env = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "ERROR: jax already started with 1 device(s)" in out.stdout
    assert "gv.use_cpu_devices(8) before any jax computation" in out.stdout
    assert "restart the kernel" in out.stdout
