"""exp, log, log1p and tanh that numba can vectorize: what `np.exp(x)` and friends compile to in generated code.

numba compiles `np.exp(a)` over an array to a loop calling the C library's scalar `exp` once per
element, which LLVM cannot turn into SIMD code, so it runs several times slower than NumPy's. Here
each function is arithmetic only (a rational approximation after range reduction, with the exponent
set through the float's bits), so the loop over them vectorizes, within 2 ulp of NumPy (numba's own
calls are within 1-3 ulp of it too).

The approximations are Cephes' (Stephen L. Moshier's public-domain library, as in scipy.special),
with special values (inf, nan, 0, subnormals, overflow) chosen by selects, not branches. Complex
arguments go to numba's own functions. `codegen.vmath` points the compiled text of
generated modules here (`np.exp(x)` -> `vexp(x)`); the readable source keeps NumPy's names.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.extending import intrinsic, overload

from s2sad.runtime import native

__all__ = ["vexp", "vlog", "vlog1p", "vtanh"]

# ---------------------------------------------------------------- the float's bits


@intrinsic
def _from_bits(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def _to_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


# ---------------------------------------------------------------- exp

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93145751953125e-1  # ln 2 in two parts: n * _LN2_HI is exact for the n that occur
_LN2_LO = 1.42860682030941723212e-6
_EXP_P = (1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1)
_EXP_Q = (3.00198505138664455042e-6, 2.52448340349684104192e-3, 2.27265548208155028766e-1,
          2.00000000000000000009e0)
_EXP_OVER = 7.09782712893383973096e2  # exp(x) is inf above this
_EXP_UNDER = -7.45133219101941108420e2  # and 0 below this


@njit(inline="always")
def _pow2(n):
    """2.0 ** n for integral n in [-1022, 1023], from the bits."""
    return _from_bits((np.int64(n) + 1023) << 52)


@njit(inline="always")
def _exp_parts(x):
    """(n, r P, Q) with exp(x) = 2**n * (Q + r P) / (Q - r P), |r| <= ln(2)/2: Cephes' Pade form, for x
    within [-746, 710]."""
    n = np.floor(_LOG2E * x + 0.5)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    rr = r * r
    rp = r * ((_EXP_P[0] * rr + _EXP_P[1]) * rr + _EXP_P[2])
    q = ((_EXP_Q[0] * rr + _EXP_Q[1]) * rr + _EXP_Q[2]) * rr + _EXP_Q[3]
    return n, rp, q


@njit(inline="always")
def exp_real(x):
    """exp(x) = 2**n * exp(r), exp(r) = 1 + 2 r P / (Q - r P) (`_exp_parts`)."""
    n, rp, q = _exp_parts(min(max(x, -746.0), 710.0))  # keeps n in int64's range; the selects below fix the ends
    half = np.floor(0.5 * n)  # 2**n in two factors: each stays a normal float down to subnormal results
    result = (1.0 + 2.0 * (rp / (q - rp))) * _pow2(half) * _pow2(n - half)
    result = np.inf if x > _EXP_OVER else result
    result = 0.0 if x < _EXP_UNDER else result
    return x if x != x else result


# ---------------------------------------------------------------- log

_SQRT_HALF = 7.07106781186547524401e-1
_LOG_P = (1.01875663804580931796e-4, 4.97494994976747001425e-1, 4.70579119878881725854e0,
          1.44989225341610930846e1, 1.79368678507819816313e1, 7.70838733755885391666e0)
_LOG_Q = (1.12873587189167450590e1, 4.52279145837532221105e1, 8.29875266912776603211e1,
          7.11544750618563894466e1, 2.31251620126765340583e1)
_TINY = 2.2250738585072014e-308  # smallest normal float
_MANTISSA = 0x000FFFFFFFFFFFFF
_HALF_EXPONENT = 1022 << 52  # the bits of an exponent that puts the mantissa in [0.5, 1)


@njit(inline="always")
def log_real(x):
    """log(x) = e ln 2 + log(1 + f), x = 2**e (1 + f), sqrt(1/2) <= 1 + f < sqrt(2), with Cephes'
    log(1 + f) = f - f**2/2 + f**3 P(f)/Q(f) and ln 2 in two parts."""
    subnormal = x < _TINY
    xs = x * 18014398509481984.0 if subnormal else x  # 2**54: subnormals become normal
    bits = _to_bits(xs)
    e = ((bits >> 52) & 0x7FF) - 1022 - (54 if subnormal else 0)
    m = _from_bits((bits & _MANTISSA) | _HALF_EXPONENT)  # in [0.5, 1)
    low = m < _SQRT_HALF
    f = (m + m - 1.0) if low else (m - 1.0)
    k = float(e - 1 if low else e)
    z = f * f
    p = ((((_LOG_P[0] * f + _LOG_P[1]) * f + _LOG_P[2]) * f + _LOG_P[3]) * f + _LOG_P[4]) * f + _LOG_P[5]
    q = ((((f + _LOG_Q[0]) * f + _LOG_Q[1]) * f + _LOG_Q[2]) * f + _LOG_Q[3]) * f + _LOG_Q[4]
    y = f * (z * p / q) - k * 2.121944400546905827679e-4 - 0.5 * z
    result = (f + y) + k * 0.693359375
    result = np.inf if x == np.inf else result
    result = -np.inf if x == 0.0 else result
    return np.nan if (x < 0.0 or x != x) else result


_LOG1P_P = (4.5270000862445199635215e-5, 4.9854102823193375972212e-1, 6.5787325942061044846969e0,
            2.9911919328553073277375e1, 6.0949667980987787057556e1, 5.7112963590585538103336e1,
            2.0039553499201281259648e1)
_LOG1P_Q = (1.5062909083469192043167e1, 8.3047565967967209469434e1, 2.2176239823732856465394e2,
            3.0909872225312059774938e2, 2.1642788614495947685003e2, 6.0118660497603843919306e1)


@njit(inline="always")
def log1p_real(x):
    """log(1 + x) without cancellation: Cephes' x - x**2/2 + x**3 P(x)/Q(x) where sqrt(1/2) <= 1 + x
    <= sqrt(2), log(1 + x) outside."""
    z = x * x
    p = (((((_LOG1P_P[0] * x + _LOG1P_P[1]) * x + _LOG1P_P[2]) * x + _LOG1P_P[3]) * x + _LOG1P_P[4]) * x
         + _LOG1P_P[5]) * x + _LOG1P_P[6]
    q = (((((x + _LOG1P_Q[0]) * x + _LOG1P_Q[1]) * x + _LOG1P_Q[2]) * x + _LOG1P_Q[3]) * x + _LOG1P_Q[4]) * x \
        + _LOG1P_Q[5]
    near = x + (x * (z * p / q) - 0.5 * z)
    far = log_real(1.0 + x)
    return near if (1.0 + x >= _SQRT_HALF and 1.0 + x <= 1.4142135623730951) else far  # nan: far


# ---------------------------------------------------------------- tanh

_TANH_P = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
_TANH_Q = (1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)


@njit(inline="always")
def tanh_real(x):
    """Cephes: x + x**3 P(x**2)/Q(x**2) below 0.625, else 1 - 2 / (exp(2|x|) + 1), with x's sign
    (odd: also -0.0 for -0.0; nan stays nan).

    With exp(2|x|) = 2**n (Q + rP) / (Q - rP), the second is 1 - 2 (Q - rP) / (2**n (Q + rP) + Q - rP), so
    both are `base + num / den` and one division serves either: divisions set the loop's pace."""
    z = abs(x)
    s = x * x
    n, rp, q = _exp_parts(2.0 * min(z, 22.0))  # tanh(22) rounds to 1
    below = q - rp
    small = z < 0.625
    base = x if small else 1.0
    num = x * s * ((_TANH_P[0] * s + _TANH_P[1]) * s + _TANH_P[2]) if small else -2.0 * below
    den = ((s + _TANH_Q[0]) * s + _TANH_Q[1]) * s + _TANH_Q[2] if small else _pow2(n) * (q + rp) + below
    return x if x != x else np.copysign(base + num / den, x)


# ---------------------------------------------------------------- the functions generated code calls


def vexp(x):
    """np.exp(x); compiled, arithmetic numba vectorizes (see the module's docstring)."""
    return np.exp(x)


def vlog(x):
    """np.log(x); compiled, arithmetic numba vectorizes (see the module's docstring)."""
    return np.log(x)


def vlog1p(x):
    """np.log1p(x); compiled, arithmetic numba vectorizes (see the module's docstring)."""
    return np.log1p(x)


def vtanh(x):
    """np.tanh(x); compiled, arithmetic numba vectorizes (see the module's docstring)."""
    return np.tanh(x)


# The loops over flat arrays, one per kernel and module-level: the backend caches them on disk
# (backend._cache_runtime), so each is compiled once per dtype on a machine, not in every process.
# error_model: python's model checks every division for zero, which stops the vectorizer.

@njit(error_model="numpy")
def exp_loop(source, target):
    for i in range(source.size):
        target[i] = exp_real(np.float64(source[i]))


@njit(error_model="numpy")
def log_loop(source, target):
    for i in range(source.size):
        target[i] = log_real(np.float64(source[i]))


@njit(error_model="numpy")
def tanh_loop(source, target):
    for i in range(source.size):
        target[i] = tanh_real(np.float64(source[i]))


@njit(error_model="numpy")
def log1p_loop(source, target):
    for i in range(source.size):
        target[i] = log1p_real(np.float64(source[i]))


# The loops with C arguments (pointers and a count), compiled once per machine as C functions
# (runtime.native): numba would otherwise compile each vectorized loop again into every generated
# function that calls it. Module-level functions without closures, so that numba's cache can key them.
def exp_c_loop(source, target, n):
    exp_loop(carray(source, n), carray(target, n))


def log_c_loop(source, target, n):
    log_loop(carray(source, n), carray(target, n))


def tanh_c_loop(source, target, n):
    tanh_loop(carray(source, n), carray(target, n))


def log1p_c_loop(source, target, n):
    log1p_loop(carray(source, n), carray(target, n))


def _overload(function, kernel, loop, c_loop, numpy_function) -> None:
    """Real numbers through `kernel` in float64 (float32 rounded back: NumPy's result type), arrays of
    them through `loop`, over a contiguous copy (float64 and float32 ones through its C functions);
    anything else (complex, bool) to NumPy's function.

    A loop of its own, not a ufunc: numba fuses ufunc calls into the array expression around them,
    and a fused loop holding two kernels, or a kernel and a C-library call, is not vectorized, where
    the kernel's selects cost more than the C library's branches: such a fused loop is slower than
    NumPy's names, and separate loops are faster than either."""
    c_loops = native.declare(c_loop, (native.DATA, native.DATA, native.COUNT))

    @overload(function)
    def typed(x):
        if isinstance(x, types.Array) and isinstance(x.dtype, (types.Float, types.Integer)) and x.ndim > 0:
            dtype = x.dtype if isinstance(x.dtype, types.Float) else types.float64
            c_function = native.chosen(c_loops, x.dtype)  # (x is made contiguous first)
            if c_function is not None:
                def over_array_in_c(x):
                    out, source = np.empty(x.shape, dtype), np.ascontiguousarray(x)
                    c_function(source.ctypes, out.ctypes, source.size)
                    return out
                return over_array_in_c

            def over_array(x):
                out = np.empty(x.shape, dtype)
                loop(np.ascontiguousarray(x).reshape(x.size), out.reshape(out.size))
                return out
            return over_array
        if x == types.float32:
            return lambda x: np.float32(kernel(np.float64(x)))
        if isinstance(x, (types.Float, types.Integer)):  # numba's Boolean is not an Integer
            return lambda x: kernel(np.float64(x))
        return lambda x: numpy_function(x)


_overload(vexp, exp_real, exp_loop, exp_c_loop, np.exp)
_overload(vlog, log_real, log_loop, log_c_loop, np.log)
_overload(vtanh, tanh_real, tanh_loop, tanh_c_loop, np.tanh)
_overload(vlog1p, log1p_real, log1p_loop, log1p_c_loop, np.log1p)
