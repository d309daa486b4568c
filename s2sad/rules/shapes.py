"""Shape functions and array building: reshapes, transposes, flips, rolls, tiles, repeats, pads, concatenation.

All are linear, so each tangent applies the function itself to the operand's tangent and each
adjoint applies the transposed shape operation to `g` (first brought to the result's shape with
`unbroadcast`, since the adjoint of a result may arrive broadcast bigger). Where numba lacks a
form, `print_as` names a stand-in from s2sad/runtime/shapes.py; the transposes with no NumPy
spelling (reshape_like, untranspose, tile_adjoint, ...) are runtime helpers with rules of their own.
"""

import numpy as np

from s2sad.rules.registry import Check, defrule
from s2sad.runtime import (as_float, as_float32, atleast_1d, atleast_2d, atleast_3d, concat_embed, concat_part, concatenate2,
                           expand_dims_any, flip_any, if_inexact, item_adjoint, number_like, only_item, pad_any,
                           repeat_adjoint, repeat_any, reshape_any, reshape_like, roll_any, squeeze_any, tile_adjoint,
                           tile_any, unbroadcast, unpad, untranspose)

ND = ((3,), (2, 3), (2, 3, 2))
MATRIX = ((2, 3),)
CUBE = ((2, 3, 4),)


# ------------------------------------------------------------------ reshapes
# The adjoint of every reshape is `g` reshaped back to the operand's shape.

def reshape_tangent(g, out, x, shape):
    return reshape_any(g, shape), None


@defrule(np.reshape, reshape_any, elementwise=False, views=True, shape_arg=1, print_as="reshape_any",
         tangent=reshape_tangent,
         checks=[Check("np.reshape(a, (3, 2))", shapes=MATRIX), Check("np.reshape(a, (-1,))", shapes=ND),
                 Check("np.reshape(a, (2, -1))", shapes=((3, 4), (2, 3, 2))),
                 Check("np.reshape(a, (1, 1))", shapes=((),)),
                 Check("np.reshape(np.transpose(a), 6)", shapes=MATRIX)])
def reshape(g, out, x, shape):
    return reshape_like(unbroadcast(g, out), x), None


def reshape_like_tangent(g, out, t, like):
    return reshape_like(g, like), None


@defrule(reshape_like, name="reshape_like", elementwise=False, shape_only=(1,), shaped_like=1,
         tangent=reshape_like_tangent,
         checks=[Check("reshape_like(a, b)", shapes=(((6,), (2, 3)), ((2, 3), (3, 2)), ((3, 2), (2, 3, 1)),
                                                      ((1,), ()), ((), (1, 1)), ((1, 1), ())))])
def reshape_like_rule(g, out, t, like):
    return reshape_like(unbroadcast(g, out), t), None


def ravel_tangent(g, out, x):
    return (np.ravel(g),)


@defrule(np.ravel, elementwise=False, views=True, tangent=ravel_tangent,
         checks=[Check("np.ravel(a)", shapes=ND), Check("np.ravel(np.transpose(a))", shapes=CUBE)])
def ravel(g, out, x):
    return (reshape_like(unbroadcast(g, out), x),)


def squeeze_tangent(g, out, x, axis=None):
    return (squeeze_any(g, axis),)


# numba needs the axis: without one, the result's rank would depend on the operand's shape
@defrule(np.squeeze, squeeze_any, elementwise=False, views=True, print_as="squeeze_any", tangent=squeeze_tangent,
         checks=[Check("np.squeeze(a, 0)", shapes=((1, 3), (1,))), Check("np.squeeze(a, -2)", shapes=((2, 1, 3),)),
                 Check("np.squeeze(a, (0, 2))", shapes=((1, 3, 1),))])
def squeeze(g, out, x, axis=None):
    return (reshape_like(unbroadcast(g, out), x),)


def expand_dims_tangent(g, out, x, axis):
    return expand_dims_any(g, axis), None


def expand_dims_adjoint(g, out, x, axis):
    return reshape_like(unbroadcast(g, out), x), None


# Two rules, one template: np.expand_dims itself, and the helper the frontend lowers np.stack to.
defrule(np.expand_dims, name="expand_dims", elementwise=False, views=True, print_as="expand_dims_any",
        tangent=expand_dims_tangent,
        checks=[Check("np.expand_dims(a, 0)", shapes=((), (3,), (2, 3))), Check("np.expand_dims(a, -1)", shapes=ND),
                Check("np.expand_dims(a, (0, 2))", shapes=MATRIX)])(expand_dims_adjoint)
defrule(expand_dims_any, name="expand_dims_any", elementwise=False, views=True, tangent=expand_dims_tangent,
        checks=[Check("expand_dims_any(a, 0)", shapes=((), (3,), (2, 3))),
                Check("expand_dims_any(a, -1)", shapes=((), (2, 3)))])(expand_dims_adjoint)


def atleast_1d_tangent(g, out, x):
    return (atleast_1d(g),)


@defrule(atleast_1d, np.atleast_1d, name="atleast_1d", elementwise=False, views=True, print_as="atleast_1d",
         tangent=atleast_1d_tangent,
         checks=[Check("atleast_1d(a)", shapes=((), (3,), (2, 3))), Check("np.atleast_1d(a)", shapes=((),))])
def atleast_1d_rule(g, out, x):
    return (reshape_like(unbroadcast(g, out), x),)


def atleast_2d_tangent(g, out, x):
    return (atleast_2d(g),)


@defrule(atleast_2d, np.atleast_2d, name="atleast_2d", elementwise=False, views=True, print_as="atleast_2d",
         tangent=atleast_2d_tangent,
         checks=[Check("atleast_2d(a)", shapes=((), (3,), (2, 3), (2, 3, 2))), Check("np.atleast_2d(a)", shapes=((),))])
def atleast_2d_rule(g, out, x):
    return (reshape_like(unbroadcast(g, out), x),)


def atleast_3d_tangent(g, out, x):
    return (atleast_3d(g),)


@defrule(atleast_3d, np.atleast_3d, name="atleast_3d", elementwise=False, views=True, print_as="atleast_3d",
         tangent=atleast_3d_tangent,
         checks=[Check("np.atleast_3d(a)", shapes=((), (3,), (2, 3), (2, 3, 2)))])
def atleast_3d_rule(g, out, x):
    return (reshape_like(unbroadcast(g, out), x),)


def as_float_tangent(g, out, x):
    return (as_float(g),)


@defrule(as_float, name="as_float", tangent=as_float_tangent, cuda="float", checks=[Check("as_float(a)")])
def as_float_rule(g, out, x):
    return (g,)


def only_item_tangent(g, out, x):
    return (only_item(g),)


@defrule(only_item, name="only_item", elementwise=False, tangent=only_item_tangent,
         checks=[Check("only_item(a)", shapes=((), (1,), (1, 1)))])
def only_item_rule(g, out, x):
    return (item_adjoint(g, x),)


def item_adjoint_tangent(g, out, t, x):
    return item_adjoint(g, x), None


@defrule(item_adjoint, name="item_adjoint", elementwise=False, tangent=item_adjoint_tangent,
         checks=[Check("item_adjoint(a, b)", shapes=(((), ()), ((), (1,)), ((), (1, 1))))])
def item_adjoint_rule(g, out, t, x):
    return only_item(unbroadcast(g, out)), None


def as_float32_tangent(g, out, x):
    return (as_float32(g),)


@defrule(as_float32, name="as_float32", tangent=as_float32_tangent, checks=[Check("as_float32(a)", step=0.1)])
def as_float32_rule(g, out, x):
    return (unbroadcast(g, x),)  # in x's precision


def number_like_tangent(g, out, value, like):
    return if_inexact(number_like(g, like), like), None


# `x.dtype.type(value)`: a number of x's dtype (x is read for its dtype alone); an integer dtype truncates it
@defrule(number_like, name="number_like", elementwise=False, shape_only=(1,), precision_of=1,
         tangent=number_like_tangent, checks=[Check("number_like(a, b)", shapes=(((), (3,)), ((), ())))])
def number_like_rule(g, out, value, like):
    return if_inexact(unbroadcast(g, value), like), None


def if_inexact_tangent(g, out, x, like):
    return if_inexact(g, like), None


# the derivative of a value stored into an array whose dtype is known at run time (analyze.run_time_dtype)
@defrule(if_inexact, name="if_inexact", elementwise=False, shape_only=(1,), tangent=if_inexact_tangent,
         checks=[Check("if_inexact(a, b)", shapes=(((3,), (3,)), ((), (2,))))])
def if_inexact_rule(g, out, x, like):
    return if_inexact(unbroadcast(g, out), like), None


def broadcast_to_tangent(g, out, x, shape):
    return np.broadcast_to(g, shape), None


@defrule(np.broadcast_to, elementwise=False, views=True, tangent=broadcast_to_tangent,
         checks=[Check("np.broadcast_to(a, (2, 3))", shapes=((), (3,), (1, 3), (2, 1))),
                 Check("np.broadcast_to(a, (4, 2, 3))", shapes=MATRIX), Check("np.broadcast_to(a, 3)", shapes=((),))])
def broadcast_to(g, out, x, shape):
    return unbroadcast(g, x), None


def full_tangent(g, out, shape, fill_value):
    return None, np.full(shape, g)


# np.full is np.broadcast_to(fill_value, shape), copied: the fill value's derivative spreads to every entry.
@defrule(np.full, elementwise=False, shape_arg=0, dtype_from=(1,), tangent=full_tangent,
         checks=[Check("np.full(3, a)", shapes=((),)), Check("np.full((2, 3), a)", shapes=((),))])
def full(g, out, shape, fill_value):
    return None, unbroadcast(g, fill_value)


def full_like_tangent(g, out, x, fill_value):
    return None, np.zeros_like(x) + g


# np.full_like(x, v) takes only x's shape and dtype: the derivative is the fill value's, as np.full's.
@defrule(np.full_like, elementwise=False, shaped_like=0, precision_of=0, tangent=full_like_tangent,
         checks=[Check("np.full_like(a, b)", shapes=(((2, 3), ()),)),
                 Check("np.full_like(np.ones((2, 3)), a)", shapes=((),))])
def full_like(g, out, x, fill_value):
    return None, unbroadcast(g, fill_value)


# ------------------------------------------------------------------ memory layouts
# The same values, perhaps in another memory order (what numba's "'@' is faster on contiguous arrays"
# asks for). NumPy hands back the operand itself when it already has the layout, so the result counts as
# a view (`views=True`: a write into either shows in the other). ascontiguousarray of a scalar is a 1-element array.

def ascontiguousarray_tangent(g, out, x):
    return (np.ascontiguousarray(g),)


@defrule(np.ascontiguousarray, elementwise=False, views=True, tangent=ascontiguousarray_tangent,
         checks=[Check("np.ascontiguousarray(a)", shapes=ND), Check("np.ascontiguousarray(np.transpose(a))", shapes=CUBE),
                 Check("np.ascontiguousarray(a)", shapes=((),))])
def ascontiguousarray(g, out, x):
    return (reshape_like(unbroadcast(g, out), x),)


def asfortranarray_tangent(g, out, x):
    return (np.asfortranarray(g),)


@defrule(np.asfortranarray, elementwise=False, views=True, tangent=asfortranarray_tangent,
         checks=[Check("np.asfortranarray(a)", shapes=ND), Check("np.asfortranarray(a[::-1])", shapes=MATRIX)])
def asfortranarray(g, out, x):
    return (reshape_like(unbroadcast(g, out), x),)


def asarray_tangent(g, out, x):
    return (np.asarray(g),)


@defrule(np.asarray, elementwise=False, views=True, dtype_from=(0,), tangent=asarray_tangent,
         checks=[Check("np.asarray(a)", shapes=ND), Check("np.asarray(a)", shapes=((),))])
def asarray(g, out, x):
    return (reshape_like(unbroadcast(g, out), x),)


# ------------------------------------------------------------------ permutations of the axes or the entries

def transpose_tangent(g, out, x, axes=None):
    return (np.transpose(g, axes),)


@defrule(np.transpose, elementwise=False, views=True, tangent=transpose_tangent,
         checks=[Check("np.transpose(a)", shapes=ND), Check("np.transpose(a, (1, 2, 0))", shapes=CUBE),
                 Check("np.transpose(a, (-1, 0, 1))", shapes=CUBE), Check("np.transpose(a, (1, 0))", shapes=MATRIX)])
def transpose(g, out, x, axes=None):
    return (untranspose(unbroadcast(g, out), axes),)


def untranspose_tangent(g, out, t, axes=None):
    return (untranspose(g, axes),)


@defrule(untranspose, name="untranspose", elementwise=False, tangent=untranspose_tangent,
         checks=[Check("untranspose(a)", shapes=MATRIX), Check("untranspose(a, (1, 2, 0))", shapes=CUBE)])
def untranspose_rule(g, out, t, axes=None):
    return (np.transpose(unbroadcast(g, out), axes),)


def swapaxes_tangent(g, out, x, axis1, axis2):
    return np.swapaxes(g, axis1, axis2), None, None


@defrule(np.swapaxes, elementwise=False, views=True, tangent=swapaxes_tangent,
         checks=[Check("np.swapaxes(a, 0, 1)", shapes=MATRIX), Check("np.swapaxes(a, 0, -1)", shapes=CUBE)])
def swapaxes(g, out, x, axis1, axis2):
    return np.swapaxes(unbroadcast(g, out), axis1, axis2), None, None


def moveaxis_tangent(g, out, x, source, destination):
    return np.moveaxis(g, source, destination), None, None


@defrule(np.moveaxis, elementwise=False, views=True, tangent=moveaxis_tangent,
         checks=[Check("np.moveaxis(a, 0, -1)", shapes=((2, 3), (2, 3, 4))),
                 Check("np.moveaxis(a, (0, 1), (2, 0))", shapes=CUBE)])
def moveaxis(g, out, x, source, destination):
    return np.moveaxis(unbroadcast(g, out), destination, source), None, None


def flip_tangent(g, out, x, axis=None):
    return (flip_any(g, axis),)


@defrule(np.flip, flip_any, elementwise=False, views=True, print_as="flip_any", tangent=flip_tangent,
         checks=[Check("np.flip(a)", shapes=ND), Check("np.flip(a, 1)", shapes=MATRIX),
                 Check("np.flip(a, -1)", shapes=CUBE), Check("np.flip(a, (0, 2))", shapes=CUBE)])
def flip(g, out, x, axis=None):
    return (flip_any(unbroadcast(g, out), axis),)


def roll_tangent(g, out, x, shift, axis=None):
    return roll_any(g, shift, axis), None


@defrule(np.roll, roll_any, elementwise=False, print_as="roll_any", tangent=roll_tangent,
         checks=[Check("np.roll(a, 1)", shapes=ND), Check("np.roll(a, -2, 1)", shapes=MATRIX),
                 Check("np.roll(a, 4, 0)", shapes=((3, 2),)), Check("np.roll(a, 1, -1)", shapes=CUBE)])
def roll(g, out, x, shift, axis=None):
    return roll_any(unbroadcast(g, out), -shift, axis), None


# ------------------------------------------------------------------ repetitions: adjoints sum the copies

def tile_tangent(g, out, x, reps):
    return tile_any(g, reps), None


@defrule(np.tile, tile_any, elementwise=False, print_as="tile_any", tangent=tile_tangent,
         checks=[Check("np.tile(a, 2)", shapes=((), (3,), (2, 3))), Check("np.tile(a, (2, 1))", shapes=((3,), (2, 3))),
                 Check("np.tile(a, (2, 1, 2))", shapes=MATRIX), Check("np.tile(a, (2,))", shapes=CUBE)])
def tile(g, out, x, reps):
    return tile_adjoint(unbroadcast(g, out), x, reps), None


def tile_adjoint_tangent(g, out, t, x, reps):
    return tile_adjoint(g, x, reps), None, None


@defrule(tile_adjoint, name="tile_adjoint", elementwise=False, tangent=tile_adjoint_tangent,
         checks=[Check("tile_adjoint(a, b, 2)", shapes=(((6,), (3,)), ((2, 6), (2, 3)), ((2,), ()))),
                 Check("tile_adjoint(a, b, (2, 1))", shapes=(((4, 3), (2, 3)), ((2, 3), (3,))))])
def tile_adjoint_rule(g, out, t, x, reps):
    return tile_any(unbroadcast(g, out), reps), None, None


def repeat_tangent(g, out, x, repeats, axis=None):
    return repeat_any(g, repeats, axis), None


@defrule(np.repeat, repeat_any, elementwise=False, print_as="repeat_any", tangent=repeat_tangent,
         checks=[Check("np.repeat(a, 2)", shapes=((), (3,), (2, 3))), Check("np.repeat(a, 3, 1)", shapes=MATRIX),
                 Check("np.repeat(a, 2, 0)", shapes=((3,),)), Check("np.repeat(a, 2, -1)", shapes=((2, 3, 2),))])
def repeat(g, out, x, repeats, axis=None):
    return repeat_adjoint(unbroadcast(g, out), x, repeats, axis), None


def repeat_adjoint_tangent(g, out, t, x, repeats, axis=None):
    return repeat_adjoint(g, x, repeats, axis), None, None


@defrule(repeat_adjoint, name="repeat_adjoint", elementwise=False, tangent=repeat_adjoint_tangent,
         checks=[Check("repeat_adjoint(a, b, 2)", shapes=(((6,), (3,)), ((12,), (2, 3)), ((2,), ()))),
                 Check("repeat_adjoint(a, b, 2, 1)", shapes=(((2, 6), (2, 3)),))])
def repeat_adjoint_rule(g, out, t, x, repeats, axis=None):
    return repeat_any(unbroadcast(g, out), repeats, axis), None, None


# ------------------------------------------------------------------ blocks: padding and concatenation

def pad_tangent(g, out, x, pad_width, mode="constant", constant_values=0):
    return pad_any(g, pad_width), None  # the constant is not differentiated


@defrule(np.pad, pad_any, elementwise=False, print_as="pad_any", tangent=pad_tangent,
         checks=[Check("np.pad(a, 1)", shapes=ND), Check("np.pad(a, (1, 2))", shapes=MATRIX),
                 Check("np.pad(a, 2, constant_values=1.5)", shapes=((3,),)),
                 Check("np.pad(a, (2,), mode='constant')", shapes=MATRIX)])
def pad(g, out, x, pad_width, mode="constant", constant_values=0):
    return unpad(unbroadcast(g, out), pad_width), None


def unpad_tangent(g, out, t, pad_width):
    return unpad(g, pad_width), None


@defrule(unpad, name="unpad", elementwise=False, tangent=unpad_tangent,
         checks=[Check("unpad(a, 1)", shapes=((4,), (4, 5))), Check("unpad(a, (1, 2))", shapes=((5, 4),))])
def unpad_rule(g, out, t, pad_width):
    return pad_any(unbroadcast(g, out), pad_width), None


CONCAT = (((2,), (3,)), ((2, 3), (1, 3)))


def concatenate2_tangent(g, out, a, b, axis=0):
    return concat_embed(g, out, axis, 0), concat_embed(g, out, axis, 1)


@defrule(concatenate2, name="concatenate2", elementwise=False, tangent=concatenate2_tangent,
         checks=[Check("concatenate2(a, b)", shapes=CONCAT), Check("concatenate2(a, b, 0)", shapes=CONCAT),
                 Check("concatenate2(a, b, 1)", shapes=(((2, 3), (2, 2)),)),
                 Check("concatenate2(a, b, -1)", shapes=(((2, 3, 1), (2, 3, 2)),)),
                 Check("concatenate2(a, a, 0)", shapes=((2, 3),))])
def concatenate2_rule(g, out, a, b, axis=0):
    g = unbroadcast(g, out)
    return concat_part(g, a, axis, 0), concat_part(g, b, axis, 1)


# concat_part(t, like, axis, at_end) takes the block concat_embed(h, like, axis, at_end) puts into zeros
def concat_part_tangent(g, out, t, like, axis, at_end):
    return concat_part(g, like, axis, at_end), None


@defrule(concat_part, name="concat_part", elementwise=False, tangent=concat_part_tangent,
         checks=[Check("concat_part(a, b, 0, 0)", shapes=(((5,), (2,)),)),
                 Check("concat_part(a, b, 1, 1)", shapes=(((2, 5), (2, 3)),)),
                 Check("concat_part(a, b, -1, 1)", shapes=(((2, 3, 4), (2, 3, 1)),))])
def concat_part_rule(g, out, t, like, axis, at_end):
    return concat_embed(unbroadcast(g, out), t, axis, at_end), None


def concat_embed_tangent(g, out, h, like, axis, at_end):
    return concat_embed(g, like, axis, at_end), None


@defrule(concat_embed, name="concat_embed", elementwise=False, tangent=concat_embed_tangent,
         checks=[Check("concat_embed(a, b, 0, 1)", shapes=(((2,), (5,)),)),
                 Check("concat_embed(a, b, 1, 0)", shapes=(((2, 3), (2, 5)),))])
def concat_embed_rule(g, out, h, like, axis, at_end):
    return concat_part(unbroadcast(g, out), h, axis, at_end), None
