"""Arrays that share memory (s2sad/sharing.py): refused where a write would show through another
name NumPy reads afterwards, taken (and differentiated correctly) where none does, or where an update
of a view is written into the array it views."""

import inspect

import numpy as np
import pytest

import s2sad
import sharing_functions as F
from helpers import assert_close, fd_grad

R = np.random.default_rng(11)
VECTOR, MATRIX = R.uniform(-1.0, 1.0, 5), R.uniform(-1.0, 1.0, (4, 3))
SIX = np.array([0.3, -0.5, 0.8, 1.1, -0.2, 0.6])

REFUSED = [  # (function, argument, the write the message points at, the name it names as sharing)
    (F.store_under_a_view, VECTOR, "acc[0] = 2.0 * acc[0]", "tail"),
    (F.augmented_under_a_transpose, MATRIX, "acc *= 2.0", "mt"),
    (F.loop_reads_a_shifted_view, VECTOR, "y[i + 1] = prev[i] * 0.5 + x[i + 1]", "prev"),
    (F.max_of_a_view_then_loop_writes, MATRIX, "acc[i, :] += 0.5", "flipped"),
    (F.helper_updates_a_viewed_array, MATRIX, "a += 1.0", "mt"),
    (F.contiguous_alias_then_write, MATRIX, "acc[0, 0] = 0.0", "c"),
    (F.alias_in_one_branch_write_in_the_other_on_a_later_pass, np.array([0.5, -0.2, 0.3, -0.7]),
     "acc[0] = acc[0] * 2.0", "b"),
    (F.alias_updated_with_its_own_view, SIX, "u += u[::-1]", "a"),
    (F.alias_reshaped_then_updated, SIX, "b += 1.0", "x"),
    (F.alias_viewed_then_base_item_written, SIX, "x[2] *= 0.5", "b"),
    (F.alias_made_by_a_helper_then_updated, SIX, "p += 0.5 * v  # the write: into the argument that `w` names too", "w"),
    (F.row_read_after_its_array_is_written, MATRIX, "m[1, -2] -= np.tanh(m[0, 0]) * u[0]", "u"),
    (F.row_of_a_reshaped_argument_then_written, SIX, "x[4] += np.cos(r[0])", "r"),
    (F.row_of_an_array_a_helper_updates, MATRIX, "p += 0.5 * v  # the write: into the argument that `w` names too", "a"),
    (F.alias_read_on_the_next_pass_after_the_write, SIX, "x[-2] = 0.5 * (b[1] + 0.25 * np.sin(b[i]))", "b"),
]
ACCEPTED = [
    (F.rows_read_before_the_next_write, MATRIX),
    (F.view_copied_before_the_write, VECTOR),
    (F.view_taken_after_the_write, VECTOR),
    (F.scalar_running_sums, VECTOR),
    (F.view_read_only_for_its_shape, VECTOR),
    (F.view_taken_anew_each_iteration, MATRIX),
    (F.augmented_view_then_base_read, VECTOR),  # `tail += 1.0` of a slice: a write into `acc`, then `tail` read anew
    (F.early_return_helper_in_a_loop, VECTOR),  # each call writes into an `out` it makes anew
    (F.item_times_the_array, VECTOR),
    (F.slice_times_another_slice, R.uniform(-1.0, 1.0, 6)),
    (F.row_slice_written_then_updated, MATRIX),
    (F.helper_updates_a_ufunc_result, VECTOR),
    (F.early_zeros_or_filled_result_in_a_loop, np.array([[0.3, -0.4], [1.5, 0.9], [0.2, 0.1]])),
    (F.explicit_step_rebinds_u_to_out, SIX),
    (F.explicit_step_on_the_argument, SIX),
    (F.explicit_step_then_a_write_into_u, SIX),
    (F.one_buffer_copied_before_the_write, SIX),  # the hint of `one_buffer_handed_to_u_each_pass`, followed
    (F.view_of_itself_in_a_loop, SIX),
    (F.shrinking_view_of_itself_in_a_loop, SIX),
    (F.element_read_before_its_write, SIX),  # an element, once the argument's rank is known
    (F.row_written_then_the_array_renamed, MATRIX),  # the row read by the adjoint is copied before the write
    (F.element_updated_then_the_array_rebound, MATRIX),
    (F.swapped_names_written_between_swaps, SIX),  # the store into `v` is undone for the adjoint's read of `w`
    (F.view_handed_through_a_helper_then_its_array_written, SIX),
    (F.row_updated_and_stored_back_each_pass, MATRIX),  # `w` is bound anew before the next pass reads it
    (F.transpose_of_a_new_array_written, MATRIX),
    (F.slice_of_a_new_array_written, SIX),
]


def line_of(snippet: str) -> int:
    lines, _ = inspect.findsource(F)
    return next(i + 1 for i, text in enumerate(lines) if snippet in text)


@pytest.mark.parametrize("fn, arg, write, other", REFUSED, ids=[c[0].__name__ for c in REFUSED])
def test_a_write_another_name_reads_past_is_refused_where_it_is(fn, arg, write, other):
    with np.errstate(all="ignore"):
        fn(arg.copy())  # NumPy runs it: the refusal is about generated code, not a broken program
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(fn, backend="python")(arg)
    header, shown, _, hint = str(info.value).splitlines()[:4]
    assert header.startswith(f"{F.__file__}:{line_of(write)}:"), header
    assert f"changes memory that `{other}` shares" in header and "afterwards" in header
    assert shown.strip() == write
    assert hint.startswith("  hint: ") and ".copy()" in hint


def test_the_hint_repeats_the_line_that_takes_the_view():
    with pytest.raises(s2sad.UnsupportedError, match=r"`tail = acc\[1:\]\.copy\(\)`"):
        s2sad.grad(F.store_under_a_view, backend="python")(VECTOR)


def test_an_augmented_assignment_hint_spells_the_rebinding():
    with pytest.raises(s2sad.UnsupportedError, match=r"`acc = acc \* \.\.\.`"):
        s2sad.grad(F.augmented_under_a_transpose, backend="python")(MATRIX)


def test_a_double_buffer_is_differentiated(backend):
    u0 = R.uniform(-1.0, 1.0, 6)
    grad = s2sad.grad(F.double_buffer, backend=backend)(u0, 4)
    assert_close(grad, fd_grad(F.double_buffer, (u0, 4), 0))


@pytest.mark.parametrize("fn, arg", ACCEPTED, ids=[c[0].__name__ for c in ACCEPTED])
def test_sharing_no_later_read_sees_is_differentiated(fn, arg, backend):
    value, grad = s2sad.value_and_grad(fn, backend=backend)(arg.copy())
    assert_close(value, fn(arg.copy()), rtol=1e-12)
    assert_close(grad, fd_grad(fn, (arg.copy(),), 0))


SWAPPED = [(F.swapped_stencil, VECTOR), (F.swapped_through_a_temporary, VECTOR),
           (F.swapped_with_the_argument, R.uniform(-1.0, 1.0, (5, 4))), (F.swapped_on_some_passes, VECTOR)]


@pytest.mark.parametrize("fn, arg", SWAPPED, ids=[c[0].__name__ for c in SWAPPED])
def test_a_double_buffer_that_swaps_names_is_differentiated(fn, arg, backend):
    kept = arg.copy()
    value, grad = s2sad.value_and_grad(fn, backend=backend)(arg)
    assert_close(value, fn(kept.copy()), rtol=1e-12)
    assert_close(grad, fd_grad(fn, (kept.copy(),), 0))
    assert np.array_equal(arg, kept), "the caller's array changed"
    _, tangent = s2sad.jvp(fn, (arg,), (np.ones_like(arg),), backend=backend)
    assert_close(tangent, np.sum(grad))


def test_a_swap_is_left_as_written_where_a_view_outlives_it():
    """`inner` views the first `u` across the exchanges: NumPy's `inner` sees the writes into that
    array on every other pass, which copies would not."""
    with pytest.raises(s2sad.UnsupportedError, match="in-place write to `un`"):
        s2sad.grad(F.view_kept_across_swaps, backend="python")(VECTOR)


def test_the_plain_call_of_a_swapping_function_runs_as_numpy_does():
    """Its second pass writes into the caller's array, under the name `b`; the compiled primal does too."""
    a = R.uniform(-1.0, 1.0, (5, 4))
    by_numpy, by_s2sad = a.copy(), a.copy()
    expected = F.swapped_with_the_argument(by_numpy)
    assert_close(s2sad.differentiate(F.swapped_with_the_argument)(by_s2sad), expected, rtol=1e-12)
    assert not np.array_equal(by_numpy, a)
    np.testing.assert_array_equal(by_s2sad, by_numpy)


def test_a_buffer_made_once_and_handed_to_u_each_pass_is_refused_at_the_write():
    """`out` made before the loop: each pass fills the memory `u` names, so the write through `u` is refused."""
    x = np.linspace(0.1, 0.9, 6)
    with pytest.raises(s2sad.UnsupportedError) as info:
        s2sad.grad(F.one_buffer_handed_to_u_each_pass, backend="python")(x)
    header, shown = str(info.value).splitlines()[:2]
    assert header.startswith(f"{F.__file__}:{line_of('u[0] += 0.5')}:") and "another name for an array" in header
    assert shown.strip() == "u[0] += 0.5"
