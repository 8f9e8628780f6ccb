"""Which calls `lint-nograd fix` knows: the tensor operations it may run with grad mode on.

A call in a region is one of three things to the fix:
- light: an elementwise, reduction or view operation on tensors (`x.mean()`, `torch.tanh(x)`,
  `x.view(-1)`), a builtin or `math` function that gives plain values (`len`, `math.sqrt`), or a
  cut (`stop_gradient(...)`, `.detach()`). Its graph holds nothing but the tensors it reads.
- known: another PyTorch operation that computes a new tensor from its arguments without calling
  back into user code or reading grad mode (`x @ w`, `torch.matmul`, `F.conv2d`, `torch.linalg.*`).
- unknown: anything else: a module or user function, a method this list does not name, a
  transform, a library outside PyTorch. What it returns and whether it reads grad mode cannot be
  seen from the file.
"""
from __future__ import annotations

LIGHT, KNOWN, UNKNOWN = "light", "known", "unknown"

_ELEMENTWISE = frozenset("""
    abs absolute acos arccos acosh arccosh add addcdiv addcmul angle asin arcsin asinh arcsinh atan arctan
    atan2 arctan2 atanh arctanh bitwise_and bitwise_not bitwise_or bitwise_xor ceil clamp clamp_min
    clamp_max clip clone conj copysign cos cosh deg2rad digamma div divide eq erf erfc erfinv exp exp2 expm1
    float_power floor floor_divide fmax fmin fmod frac ge gt heaviside hypot i0 isclose isfinite isinf isnan
    isneginf isposinf ldexp le lerp lgamma log log10 log1p log2 logaddexp logaddexp2 logical_and
    logical_not logical_or logical_xor logit lt maximum minimum mul multiply nan_to_num ne neg negative
    nextafter polygamma pow rad2deg real reciprocal remainder round rsqrt sgn sigmoid sign signbit sin sinc
    sinh sqrt square sub subtract tan tanh true_divide trunc where xlogy
    relu relu6 gelu silu selu celu elu leaky_relu hardtanh hardsigmoid hardswish mish softplus softsign
    tanhshrink hardshrink softshrink threshold logsigmoid
""".split())
_REDUCTIONS = frozenset("""
    all amax amin aminmax any argmax argmin count_nonzero cummax cummin cumprod cumsum logcumsumexp
    logsumexp max mean median min nanmean nanmedian nansum norm prod std std_mean sum var var_mean
    softmax log_softmax normalize
""".split())
_VIEWS_AND_SHAPES = frozenset("""
    chunk diag diagonal expand expand_as flatten flip fliplr flipud movedim moveaxis
    narrow permute repeat reshape reshape_as roll rot90 select split squeeze swapaxes swapdims t tensor_split
    tile transpose tril triu unbind unflatten unsqueeze view view_as
""".split())
# Functions of `torch` that make new tensors from numbers or shapes, with no graph to keep.
CREATION = frozenset("""
    arange empty empty_like eye full full_like linspace logspace ones ones_like rand rand_like randint
    randint_like randn randn_like randperm tensor zeros zeros_like
""".split())
LIGHT_NAMES = _ELEMENTWISE | _REDUCTIONS | _VIEWS_AND_SHAPES

KNOWN_NAMES = frozenset("""
    addbmm addmm addmv baddbmm bilinear bmm cat cdist concat concatenate conv1d conv2d conv3d
    conv_transpose1d conv_transpose2d conv_transpose3d cosine_similarity cross dist dot dropout einsum
    embedding gather group_norm hstack index_select inner interpolate kron layer_norm linear masked_fill
    masked_select matmul mm mv outer pad pairwise_distance pdist rms_norm scaled_dot_product_attention
    scatter sort stack take take_along_dim tensordot topk vstack kthvalue mode unique
    avg_pool1d avg_pool2d avg_pool3d max_pool1d max_pool2d max_pool3d adaptive_avg_pool1d
    adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d
    cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy
    binary_cross_entropy_with_logits kl_div cosine_embedding_loss one_hot
""".split())

# Modules whose functions are tensor operations of these names (`torch.tanh`, `F.relu`).
_OPERATION_MODULES = frozenset({"torch", "torch.Tensor", "torch.nn.functional", "torch.special"})
# Modules all of whose functions are tensor operations.
_KNOWN_MODULES = frozenset({"torch.linalg", "torch.fft"})
# Functions that give plain Python values, never a tensor.
PLAIN_BUILTINS = frozenset({"len", "int", "float", "bool", "str", "repr", "isinstance", "hasattr", "range",
                            "id", "type", "callable", "format"})
# Builtins that run a tensor's own arithmetic (`abs(x)` is `x.abs()`), and the ones above.
LIGHT_BUILTINS = PLAIN_BUILTINS | frozenset({"abs", "sum", "round", "pow", "min", "max"})
# Tensor methods that give plain values: wrapping them would only add noise.
PLAIN_METHODS = frozenset({"size", "dim", "numel", "item", "tolist", "stride", "element_size", "nelement",
                           "is_floating_point", "is_complex", "data_ptr", "storage_offset", "ndimension"})

# Operations that may return their input itself, which `no_grad` does not cut (measured on torch
# 2.13: `out is x`): `x.flatten()` of a 1-D tensor, `x.conj()` and `x.real` of a real one, `x.float()`
# of a float one, `x.contiguous()`, `x.cpu()` on CPU, `torch.atleast_2d` of a matrix, dropout in
# eval mode or with p=0. A value they give may be an input passed through: not one the region computes.
IDENTITY_NAMES = frozenset("""
    flatten conj conj_physical real positive resolve_conj resolve_neg sum_to_size to_dense dequantize
    atleast_1d atleast_2d atleast_3d broadcast_tensors cartesian_prod as_tensor asarray
    to cuda cpu float double half bfloat16 int long short bool byte char type type_as contiguous
    dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout feature_dropout
""".split())
IDENTITY_ATTRIBUTES = frozenset({"real"})  # `x.real` is `x` for a real tensor

# Operations that return a tuple when given arguments (`x.max(0)` is (values, indices)): a value
# `.detach()` cannot be called on. Without arguments (`x.max()`) they give one tensor.
TUPLE_WITH_ARGUMENTS = frozenset({"max", "min", "median", "nanmedian", "mode", "kthvalue", "cummax",
                                  "cummin"})
TUPLE_ALWAYS = frozenset({"aminmax", "std_mean", "var_mean", "sort", "topk", "unbind", "split", "chunk",
                          "tensor_split", "frexp"})


def kind_of_function(qualified_name: str) -> str:
    """LIGHT, KNOWN or UNKNOWN for a function named by its qualified name: `torch.tanh`."""
    module, _, name = qualified_name.rpartition(".")
    if module == "math":
        return LIGHT  # plain numbers in, plain numbers out
    if module in _KNOWN_MODULES or module.startswith(tuple(f"{m}." for m in _KNOWN_MODULES)):
        return KNOWN
    if module in _OPERATION_MODULES:
        if name in LIGHT_NAMES or (module == "torch" and name in CREATION):
            return LIGHT
        if name in KNOWN_NAMES:
            return KNOWN
    return UNKNOWN


def kind_of_method(name: str) -> str:
    """LIGHT, KNOWN or UNKNOWN for `value.name(...)` on a value the file does not name a type for."""
    if name in LIGHT_NAMES or name in PLAIN_METHODS:
        return LIGHT
    if name in KNOWN_NAMES:
        return KNOWN
    return UNKNOWN
