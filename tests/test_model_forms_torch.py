"""The calls of the fixture projects that reach a region through how the model is built (module
containers, inheritance, models handed to a loss or a trainer, stored functions) run with
PyTorch: each changes results, as `check` says (traced graph vs eager gradients; forward vs
reverse mode), and the look-alikes it leaves silent do not."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.func import grad, jacfwd, jacrev  # noqa: E402

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
X = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)


@pytest.fixture
def project(request):
    """Import a fixture project's `pkg`; forget it afterwards (the projects reuse package names)."""
    root = str(PROJECTS / request.param)
    sys.path.insert(0, root)
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(root)
        for name in [name for name in sys.modules if name == "pkg" or name.startswith("pkg.")]:
            del sys.modules[name]


def checker_fixture(name: str):
    """Run `fixtures/checker/<name>.py` and return it as a module."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / "fixtures" / "checker" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def traced_minus_eager(module, traced) -> float:
    """The largest difference between the input gradients of a traced module and of eager mode."""
    x1, x2 = X.clone().requires_grad_(), X.clone().requires_grad_()
    traced(x1).sum().backward()
    module(x2).sum().backward()
    return float((x1.grad - x2.grad).abs().max())


def forward_minus_reverse(function) -> float:
    return float((jacfwd(function)(X) - jacrev(function)(X)).abs().max())


def fx(module):
    return torch.fx.symbolic_trace(module)


def jit(module):
    return torch.jit.trace(module, (X,))


@pytest.mark.parametrize("project", ["containers"], indirect=True)
@pytest.mark.parametrize(("name", "how"), [("Encoder", fx), ("Heads", jit), ("WithChild", fx)])
def test_containers_traced(project, name, how):
    torch.manual_seed(0)  # (a random layer may, rarely, make the two gradients close)
    module = getattr(project("pkg.models"), name)().double()
    assert traced_minus_eager(module, how(module)) > 0.1


@pytest.mark.parametrize("project", ["containers"], indirect=True)
@pytest.mark.parametrize("name", ["Stack", "Indexed", "Paired"])
def test_containers_in_forward_mode(project, name):
    assert forward_minus_reverse(getattr(project("pkg.models"), name)().double()) > 0.1


@pytest.mark.parametrize("project", ["containers"], indirect=True)
def test_a_container_traced_itself(project):
    blocks = project("pkg.blocks")
    module = torch.nn.Sequential(blocks.Direct(), torch.nn.Identity())
    assert traced_minus_eager(module, jit(module)) > 0.1


@pytest.mark.parametrize("project", ["containers"], indirect=True)
def test_container_look_alikes_hold_regions_nothing_reaches(project):
    """`Spare` is held but never run by a traced forward: tracing `Encoder` never runs it."""
    models, blocks = project("pkg.models"), project("pkg.blocks")
    ran = []
    blocks.Spare.forward = lambda self, x: ran.append(x) or x
    fx(models.Encoder().double())
    jit(models.Heads().double())
    assert ran == []


def reverse_tangent(function, z):
    """What jvp(function, (z,), (ones,)) computes, by reverse mode (which respects regions)."""
    return jacrev(function)(z) @ torch.ones_like(z)


@pytest.mark.parametrize("project", ["models_handed_around"], indirect=True)
def test_a_model_handed_to_a_loss_that_applies_jvp_to_a_closure_over_it(project):
    losses, nets = project("pkg.losses"), project("pkg.nets")
    for model in (nets.Velocity(), nets.Scored()):
        forward = losses.flow_matching_loss(model, X, 1.0) if isinstance(model, nets.Velocity) \
            else losses.train_step(model, X)
        assert float((forward - reverse_tangent(model, X)).abs().max()) > 0.1


@pytest.mark.parametrize("project", ["models_handed_around"], indirect=True)
def test_a_model_bound_by_partial_to_a_function_given_to_jvp(project):
    """`jvp(partial(pointwise, model=Bound()), ...)` runs `Bound.forward` in forward mode, also with
    the partial bound to a name first; the same binding only called runs it eagerly, where the
    region holds."""
    bound, nets = project("pkg.bound"), project("pkg.nets")
    assert float((bound.bound_tangent(X) - reverse_tangent(nets.Bound(), X)).abs().max()) > 0.1
    assert float((bound.bound_by_name(X) - reverse_tangent(nets.BoundByName(), X)).abs().max()) > 0.1
    assert torch.equal(bound.bound_score(X), nets.BoundAndCalled()(X).sum())


@pytest.mark.parametrize("project", ["passed_containers"], indirect=True)
def test_models_handed_to_helpers_inside_containers(project):
    """Each model the helpers take out of a list, a dict, `*args`, `**kwargs` or a pair and give
    to jvp gets a tangent that reverse mode disagrees with; the look-alikes are only called (or
    left in the container), so what the helpers return for them is what eager mode computes."""
    nets, probe = project("pkg.nets"), project("pkg.probe")
    x = X.float()
    tangents = {
        nets.Listed: lambda m: probe.each([m], x)[0],
        nets.Named: lambda m: probe.by_name({"named": m}, x)["named"],
        nets.Keyed: lambda m: probe.encoder_tangent({"encoder": m, "other": nets.OtherKey()}, x),
        nets.Starred: lambda m: probe.all_of(m, x=x)[0],
        nets.KeywordStarred: lambda m: probe.decoder_tangent(x, decoder=m, other=nets.OtherKey()),
        nets.Second: lambda m: probe.second_tangent((nets.First(), m), x),
    }
    for cls, tangent in tangents.items():
        model = cls()
        assert float((tangent(model) - reverse_tangent(model, x)).abs().max()) > 0.1, cls.__name__
    only_called = nets.OnlyCalled()
    assert torch.equal(probe.outputs([only_called], x)[0], only_called(x))


@pytest.mark.parametrize("project", ["models_handed_around"], indirect=True)
def test_a_model_kept_by_a_trainer(project):
    losses, nets = project("pkg.losses"), project("pkg.nets")
    teacher = nets.Teacher()
    assert float((losses.Trainer(teacher).tangent(X) - reverse_tangent(teacher, X)).abs().max()) > 0.1
    traced = nets.Traced()
    graph = losses.GraphMaker(traced).graph(X.clone())
    assert traced_minus_eager(traced, graph) > 0.1


@pytest.mark.parametrize("project", ["models_handed_around"], indirect=True)
def test_a_function_handed_through_helpers_of_other_modules(project):
    """`curvature(potential, x)` hands `potential` on to `hvp`, which applies jvp over grad: the
    Hessian-vector product differs from the one reverse mode computes, which respects the region."""
    curvature, nets = project("pkg.curvature"), project("pkg.nets")
    for f in (nets.energy, nets.potential):
        reverse = jacrev(torch.func.grad(f))(X) @ X
        assert float((curvature.curvature(f, X) - reverse).abs().max()) > 0.1
    assert torch.equal(curvature.value(nets.measured, X), nets.measured(X))  # only called


@pytest.mark.parametrize("project", ["inheritance"], indirect=True)
def test_a_base_class_method_that_traces_or_transforms_self(project):
    nets = project("pkg.nets")
    exported = nets.Exported()
    assert traced_minus_eager(exported, exported.export((X,))) > 0.1
    sensitive = nets.Sensitive()
    assert float((sensitive.sensitivity(X) - jacrev(sensitive)(X)).abs().max()) > 0.1


@pytest.mark.parametrize("project", ["inheritance"], indirect=True)
def test_super_along_the_chain(project):
    nets = project("pkg.nets")
    deepest = nets.Deepest()
    assert traced_minus_eager(deepest, fx(deepest)) > 0.1
    assert forward_minus_reverse(nets.Scaled()) > 0.1


@pytest.mark.parametrize("project", ["inheritance"], indirect=True)
def test_inheritance_look_alikes_agree(project):
    """`Overrides.forward` never runs the region of `Plain.forward`: traced and eager agree."""
    overrides = project("pkg.nets").Overrides()
    assert traced_minus_eager(overrides, fx(overrides)) == 0


def test_regions_spelled_through_a_variable_and_type_checking_names():
    """fixtures/checker/ng004_region_objects.py: the regions held in a variable, on `self` or
    entered on an ExitStack change forward-mode results; the look-alikes (another context manager, a name bound to torch's
    `no_grad` only for type checkers) do not."""
    module = checker_fixture("ng004_region_objects")
    assert forward_minus_reverse(module.held_in_a_variable) > 0.1
    assert forward_minus_reverse(module.Held()) > 0.1
    assert forward_minus_reverse(module.not_a_region) == 0
    assert forward_minus_reverse(module.named_at_type_checking_only) == 0
    assert forward_minus_reverse(module.entered_on_a_stack) > 0.1
    assert forward_minus_reverse(module.entered_when_asked) > 0.1
    assert forward_minus_reverse(module.stack_of_other_contexts) == 0


def test_regions_entered_through_a_class_or_a_function_of_the_file():
    """fixtures/checker/ng004_region_classes.py: a subclass of `no_grad` (as a `with` item or a
    decorator), a class whose `__enter__` turns grad off and a function returning `no_grad()`
    change forward-mode results; the look-alikes (an `__enter__` that enters nothing, sets grad
    back, or only on a condition; a function returning another context) do not."""
    module = checker_fixture("ng004_region_classes")
    for name in ("subclass", "subclass_with_its_own_enter", "subclass_of_a_subclass", "enter_turns_grad_off",
                 "enter_on_a_held_object", "made_by_a_function", "decorated"):
        assert forward_minus_reverse(getattr(module, name)) > 0.1, name
    for name in ("overridden_enter", "thawed", "set_back", "maybe_off", "timed", "made_quiet", "made_for_training"):
        assert forward_minus_reverse(getattr(module, name)) == 0, name


def test_a_name_bound_again_to_what_its_value_gives():
    """fixtures/checker/ng004_rebound_names.py: `model = model.eval()`, `.to(...)`, `DataParallel(...)
    .module` keep the model whose forward has a region, `layers += [...]` adds one, a class body's
    `act = staticmethod(act)` holds the module's function: forward mode disagrees with reverse mode;
    the look-alike's name holds another model."""
    module = checker_fixture("ng004_rebound_names")
    models = {"evaluated": module.Centered, "moved": module.Scaled, "unwrapped": module.Wrapped,
              "activated": module.Activated, "stacked": module.Stacked, "called": module.Called}
    for name, cls in models.items():
        model = cls()
        assert float((getattr(module, name)(X.float()) - jacrev(model)(X.float())).abs().max()) > 0.1, name
    assert torch.allclose(module.replaced(X.float()), jacrev(module.Plain())(X.float()))


def test_a_model_made_lazily_into_a_global_name():
    """fixtures/checker/ng004_global_names.py: the model a getter or an `init()` assigns to a
    `global` name is the one forward mode reaches, and it disagrees with reverse mode; the
    look-alikes' names hold a model without a region (reset to None, or a function's own name)."""
    module = checker_fixture("ng004_global_names")
    x = X.float()
    for name, cls in {"lazy": module.Lazy, "initialised": module.Initialised}.items():
        assert float((getattr(module, name)(x) - jacrev(cls())(x)).abs().max()) > 0.1, name
    for name in ("plain", "kept", "local_name"):
        assert torch.allclose(getattr(module, name)(x), jacrev(module.Plain())(x)), name


def test_a_model_stored_on_a_class_by_code_outside_its_body():
    """fixtures/checker/ng004_class_attributes.py: the model an `init()`, a classmethod or the
    module's code stores on a class is the one forward mode reaches through the class (or an
    instance of it), and it disagrees with reverse mode; the look-alikes hold a model without a region."""
    module = checker_fixture("ng004_class_attributes")
    x = X.float()
    for name, cls in {"initialised": module.Initialised, "current": module.Current, "cached": module.Cached}.items():
        assert float((getattr(module, name)(x) - jacrev(cls())(x)).abs().max()) > 0.1, name
    for name in ("plain", "other"):
        assert torch.allclose(getattr(module, name)(x), jacrev(module.Plain())(x)), name


def test_a_hook_recording_statistics_into_a_global_list():
    """fixtures/checker/ng005_recorded_statistics.py: hooks that only record into a module-level
    container trace to the gradients of eager mode; one that also rescales the output with a
    value of the region, or reads back what it recorded, traces to other gradients."""
    module = checker_fixture("ng005_recorded_statistics")
    for traced, hook in ((module.recorded, module.record), (module.recorded_by_name, module.record_by_name)):
        assert traced_minus_eager(module.hooked(hook), traced) == 0.0, hook.__name__
    for traced, hook in ((module.rescaled, module.rescale), (module.read, module.read_back)):
        assert traced_minus_eager(module.hooked(hook), traced) > 0.1, hook.__name__


def test_hooks_on_submodules_and_attributes_bound_together():
    """fixtures/checker/ng005_submodule_hooks.py: a hook on a submodule runs when the traced model
    runs it, and the trace of it, or of a module bound with another in one assignment, gives other
    gradients than eager mode; the look-alike traced model has no region."""
    module = checker_fixture("ng005_submodule_hooks")
    for traced, make in ((module.traced_sequential, module.sequential), (module.traced_encoded, module.Encoded),
                         (module.traced_unpacked, module.Unpacked)):
        assert traced_minus_eager(make(), traced) > 0.1, make.__name__
    assert traced_minus_eager(module.UnpackedPlain(), module.traced_plain) == 0.0
    attached = module.attach(torch.nn.Sequential(module.Scale(), module.Scale()))
    assert traced_minus_eager(attached, module.traced_attached) > 0.1
    centered = module.center(torch.nn.Sequential(module.Scale(), module.Scale()))
    assert traced_minus_eager(centered, module.traced_centered) > 0.1


def test_a_model_read_through_a_property():
    """fixtures/checker/ng004_property_values.py: the model a property's getter returns is the one
    forward mode differentiates, and it disagrees with reverse mode; the look-alike's property
    returns a model without a region."""
    module = checker_fixture("ng004_property_values")
    x = X.float()
    for name, cls in {"decoded": module.Gated, "headed": module.Scaled}.items():
        assert float((getattr(module, name)(x) - jacrev(cls())(x)).abs().max()) > 0.1, name
    assert torch.allclose(module.plain(x), jacrev(module.Plain())(x))


def test_a_model_bound_by_partial_to_functional_call():
    """fixtures/checker/ng004_partial_library_calls.py: `partial(functional_call, net, ...)` runs
    `net`, and forward mode through it disagrees with reverse mode; the look-alike's model has no
    region."""
    module = checker_fixture("ng004_partial_library_calls")
    x = X.float()
    respected = torch.func.vjp(module.Field(), x)[1](torch.ones_like(x))[0]  # the field is symmetric
    assert float((module.tangent(x) - respected).abs().max()) > 0.1
    assert float((module.jacobian(x) - jacrev(module.Gate())(x)).abs().max()) > 0.1
    t = torch.tensor(2.0)
    reverse = jacrev(lambda z: module.Damped()(t, z))(x) @ torch.ones_like(x)
    assert float((module.divergence(t, x) - reverse).abs().max()) > 0.1
    assert torch.allclose(module.plain(x), jacrev(module.Plain())(x))


def test_what_a_transform_varies_through_helpers_and_closures():
    """fixtures/checker/ng004_varied_through_helpers.py: forward mode disagrees with reverse mode
    where the region computes from what the transform varies (the input a helper hands on, a list
    the transformed function fills, a callable made from the parameter); the look-alikes' regions
    read only the model's weight or the teacher's data, and both modes agree."""
    module = checker_fixture("ng004_varied_through_helpers")
    x = X.float()

    def reverse_mode(function):  # the same function, every `jacfwd` in it by `jacrev`
        module.jacfwd = jacrev
        try:
            return function(x)
        finally:
            module.jacfwd = jacfwd

    for name in ("helped", "filled", "taught_by_itself"):
        function = getattr(module, name)
        assert float((function(x) - reverse_mode(function)).abs().max()) > 0.1, name
    for name in ("standardised", "taught"):
        function = getattr(module, name)
        torch.manual_seed(0)
        forward = function(x)
        torch.manual_seed(0)
        assert torch.allclose(forward, reverse_mode(function)), name


def test_a_region_whose_values_are_only_aux_outputs():
    """fixtures/checker/ng004_aux_outputs.py: under `has_aux=True` forward and reverse mode agree
    on the Jacobian and the aux values when the region computes only aux values; they disagree
    where its value reaches the first output, where `has_aux` is not given, and through a caller."""
    module = checker_fixture("ng004_aux_outputs")
    x = X.float()
    forward, reverse = module.run(x), module.reverse(x)

    def apart(a, b) -> float:
        flat_a, flat_b = torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)
        return max(float((p - q).abs().max()) for p, q in zip(flat_a, flat_b))

    for index in (0, 1):  # with_aux, with_stats
        assert apart(forward[index], reverse[index]) == 0.0, index
    for index in (2, 3, 5):  # into_the_output, without_aux, caller
        assert apart(forward[index], reverse[index]) > 0.1, index
    respected = reverse[4][1](torch.ones_like(x))[0]  # vjp of cos: symmetric, as jvp's tangent is
    assert float((forward[4][1] - respected).abs().max()) == 0.0 and torch.equal(forward[4][2], reverse[4][2])


def test_a_submodule_calling_its_own_methods():
    """fixtures/checker/ng004_submodule_methods.py: the submodule's own method, with its region,
    runs under the transform of the model (forward and reverse mode disagree); the look-alike
    model's method of the same name never runs (they agree)."""
    module = checker_fixture("ng004_submodule_methods")
    x = X.float()
    for cls in (module.Outer, module.Stack):
        assert float((jacfwd(cls())(x) - jacrev(cls())(x)).abs().max()) > 0.1, cls.__name__
    assert torch.allclose(jacfwd(module.Shadowing())(x), jacrev(module.Shadowing())(x))


def test_a_parameter_captured_by_the_closure_a_transform_or_tracer_runs():
    """fixtures/checker/ng004_captured_parameters.py and ng005_captured_parameters.py: the model a
    closure hands to a helper, or whose method it calls, runs under `linearize` (which disagrees
    with reverse mode) or in `make_fx`'s trace (whose gradients differ from eager mode's); the
    look-alikes' helper calls nothing, or the trace records grad mode."""
    forward = checker_fixture("ng004_captured_parameters")
    x, d = X.float(), torch.tensor([1.0, -2.0, 0.5])
    for model, sensitivity, moved in ((forward.Field(), forward.sensitivity, True),
                                      (forward.Named(), forward.described, False)):
        helper = forward.render if moved else forward.describe
        reverse = jacrev(lambda o: helper(model, o))(x) @ d
        assert (float((sensitivity(model, x, d) - reverse).abs().max()) > 0.1) == moved, helper.__name__

    traced = checker_fixture("ng005_captured_parameters")
    for model, trace, moved in ((traced.Model(), traced.trace_rollout, True), (traced.Kept(), traced.trace_kept, False)):
        graph = trace(model, X.clone(), 2)
        x1, x2 = X.clone().requires_grad_(), X.clone().requires_grad_()
        graph(x1).sum().backward()
        model.rollout(x2, 2).sum().backward()
        assert (float((x1.grad - x2.grad).abs().max()) > 0.1) == moved, type(model).__name__


def test_a_method_read_on_a_compiled_module():
    """fixtures/checker/ng004_compiled_models.py: the method of the compiled module (or of what a
    helper returns, compiled or not) is the model's, with its region: `jvp` disagrees with reverse
    mode; the look-alike model has no region."""
    module = checker_fixture("ng004_compiled_models")
    x, v = X.float(), torch.tensor([1.0, -1.0, 0.5])
    for name, cls, found in (("compiled", module.Net, True), ("helped", module.Encoder, True),
                             ("plain", module.Plain, False)):
        reverse = jacrev(cls().embed)(x) @ v
        assert (float((getattr(module, name)(x, v) - reverse).abs().max()) > 0.1) == found, name
    assert float((module.helped(x, v, True) - jacrev(module.Encoder().embed)(x) @ v).abs().max()) > 0.1


def test_regions_on_buffers_and_shapes_change_nothing():
    """fixtures/checker/ng005_buffers_negatives.py and ng004_shape_arguments_negatives.py: the
    traced graphs differentiate as eager mode does, and forward mode agrees with reverse mode, so
    no finding is right."""
    traced = checker_fixture("ng005_buffers_negatives")
    x = torch.linspace(0.5, 2.0, 12, dtype=torch.float64).reshape(3, 4)
    for graph, eager in ((traced.rotary, traced.Rotary()), (traced.shifted, traced.Shifted())):
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        (graph(x1) ** 2).sum().backward()
        (eager(x2) ** 2).sum().backward()
        assert torch.allclose(x1.grad, x2.grad), type(eager).__name__

    shapes = checker_fixture("ng004_shape_arguments_negatives")
    o, d = X.float(), torch.tensor([1.0, -2.0, 0.5])
    assert torch.allclose(shapes.sensitivity(o, d), jacrev(shapes.render)(o) @ d)
    assert torch.allclose(shapes.jacobian(o), jacrev(shapes.sized)(o))


def test_regions_on_what_the_constructor_was_given():
    """fixtures/checker/ng004_constructor_arguments_negatives.py: a hyperparameter the constructor
    was given is a constant to a transform of the module's call (forward mode agrees with reverse
    mode), a number given is one to a tracer too; ng005_constructor_arguments.py: a weight given
    to share is a parameter, which the traced graph differentiates and eager mode does not."""
    module = checker_fixture("ng004_constructor_arguments_negatives")
    v = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    assert torch.allclose(module.pushforward(X, v), jacrev(module.features)(X) @ v)
    assert torch.allclose(module.jacobian(X), jacrev(module.Encoding(2, 0.7))(X))
    assert torch.allclose(module.windowed(X), jacrev(module.Windowed(1.5))(X))
    h = torch.linspace(-1.0, 2.0, 12, dtype=torch.float64).reshape(3, 4)
    x1, x2 = h.clone().requires_grad_(), h.clone().requires_grad_()
    (module.annealed(x1) * h).sum().backward()
    (module.Annealed(0.2)(x2) * h).sum().backward()
    assert torch.allclose(x1.grad, x2.grad)

    tied = checker_fixture("ng005_constructor_arguments")
    eager = tied.TiedHead(torch.nn.Embedding(5, 4).double())
    with torch.no_grad():
        eager.embedding.weight.copy_(tied.head.embedding.weight)
    tied.head(h.clone().requires_grad_()).pow(2).sum().backward()
    eager(h.clone().requires_grad_()).pow(2).sum().backward()
    assert eager.embedding.weight.grad is None
    assert float(tied.head.embedding.weight.grad.abs().max()) > 0.1


def test_a_helpers_region_whose_value_its_callers_do_not_use():
    """fixtures/checker/ng005_unused_results_negatives.py: the helpers' values are discarded or
    printed, so the traced graph differentiates as eager mode does and forward mode agrees with
    reverse mode; ng005_returned_values.py: where the value is read back or used by a second
    call, the traced gradients differ from eager mode's."""
    module = checker_fixture("ng005_unused_results_negatives")
    h = torch.linspace(-1.0, 2.0, 12, dtype=torch.float64).reshape(3, 4)
    eager = module.Attention()
    eager.load_state_dict(module.traced.state_dict())
    x1, x2 = h.clone().requires_grad_(), h.clone().requires_grad_()
    module.traced(x1).pow(2).sum().backward()
    eager(x2).pow(2).sum().backward()
    assert torch.allclose(x1.grad, x2.grad)
    assert torch.allclose(module.traced.query.weight.grad, eager.query.weight.grad)
    assert torch.allclose(module.jacobian(h), jacrev(module.attention)(h))

    used = checker_fixture("ng005_returned_values")
    for traced, eager in ((used.scaled, used.Scaled()), (used.spreads, used.Spread())):
        x1, x2 = h.clone().requires_grad_(), h.clone().requires_grad_()
        traced(x1).pow(2).sum().backward()
        eager(x2).pow(2).sum().backward()
        assert float((x1.grad - x2.grad).abs().max()) > 0.01, type(eager).__name__
    used.embedded(h.clone().requires_grad_()).pow(2).sum().backward()
    eager = used.Embedded()
    eager(h.clone().requires_grad_()).pow(2).sum().backward()
    assert eager.table.grad is None and float(used.embedded.table.grad.abs().max()) > 0.1


def test_a_region_whose_output_is_computed_in_a_reenabled_block():
    """fixtures/checker/ng005_reenabled_blocks_negatives.py: the traced module differentiates as
    eager mode does (input and parameter gradients), and forward mode agrees with reverse mode."""
    module = checker_fixture("ng005_reenabled_blocks_negatives")
    eager = module.Net()
    traced = torch.fx.symbolic_trace(eager)
    x1, x2 = X.clone().requires_grad_(), X.clone().requires_grad_()
    traced(x1).pow(2).sum().backward()
    traced_gamma = eager.gamma.grad.clone()
    eager.gamma.grad = None
    eager(x2).pow(2).sum().backward()
    assert torch.allclose(x1.grad, x2.grad) and torch.allclose(traced_gamma, eager.gamma.grad)
    assert torch.allclose(jacfwd(module.Net())(X), jacrev(module.Net())(X))


def test_a_transform_in_a_method_of_an_object_given_runs_despite_the_region():
    """fixtures/checker/ng001_parameter_methods.py: `grad` in the method called on the object
    `evaluate` is given computes the same gradient under the region as without it (the region is
    ignored, NG001), where autograd itself under `no_grad` has no graph to differentiate."""
    module = checker_fixture("ng001_parameter_methods")
    w, x = X.clone(), X.clone() * 2
    assert torch.equal(module.evaluate(module.Learner(), w, x), module.Learner().adapt(w, x))
    with torch.no_grad():
        assert not module.inner_loss(w.requires_grad_(), x).requires_grad


def test_a_region_changing_state_in_place():
    """fixtures/checker/flow_state_changed_in_place.py: forward-mode AD on duals runs the in-place
    update with the tangent (0.9, where the region respected gives 1); the trace of a region that
    also computes a value differentiates otherwise than eager mode; torch.func raises on a region
    that changes state in place."""
    module = checker_fixture("flow_state_changed_in_place")
    x = X.float()
    assert torch.allclose(module.tangent_on_duals(x), torch.full_like(x, 0.9))
    model = module.CountedScale()
    assert traced_minus_eager(model, module.traced_scale(X.clone())) > 0.1
    for look_alike in (module.jacobian_of_running_mean, module.tangent_of_codebook, module.jacobian_of_scaled):
        with pytest.raises(RuntimeError, match="mutate a captured Tensor"):
            look_alike(x)


def test_a_transform_chosen_at_run_time():
    """fixtures/checker/flow_chosen_transforms.py: the forward-mode choice of a flag or a dict of
    transforms disagrees with reverse mode (NG004); the literal key picks reverse mode, which
    respects the region (NG006, no change)."""
    module = checker_fixture("flow_chosen_transforms")
    x = X.float()
    assert float((module.by_flag(x) - module.by_flag(x, forward=False)).abs().max()) > 0.1
    assert float((module.by_name(x) - module.by_name(x, mode="rev")).abs().max()) > 0.1
    assert torch.allclose(module.by_literal_key(x), jacrev(module.ByLiteralKey())(x))


@pytest.mark.parametrize("project", ["stored_functions"], indirect=True)
def test_functions_stored_on_a_module_a_config_or_as_a_default(project):
    nets, parts = project("pkg.nets"), project("pkg.parts")
    for module in (nets.Block(residual=parts.smooth), nets.Configured(nets.Config(act=parts.sharpen)),
                   nets.Defaulted()):
        assert forward_minus_reverse(module) > 0.1, type(module).__name__
    assert forward_minus_reverse(nets.Configured(nets.Config())) == 0  # the field's default holds no region


def test_a_property_read_by_a_traced_forward():
    """fixtures/checker/ng005_properties.py: the property `forward` reads is traced without its region."""
    module = checker_fixture("ng005_properties")
    centred = module.Centred()
    assert traced_minus_eager(centred, jit(centred)) > 0.1


def test_what_partial_and_functional_call_pass():
    """fixtures/checker/ng004_partial_arguments.py: `f(p, x)` with `f = partial(weighted, model)`
    varies the parameters the region reads, and `functional_call(field, params, (x, t))` the input
    its region reads: forward mode disagrees with reverse mode. In the look-alikes
    (ng004_partial_arguments_negatives.py) the regions read the input and the time, which neither
    transform varies, and both modes agree."""
    x, t = X.clone(), torch.tensor(0.3, dtype=torch.float64)
    for name, found in (("ng004_partial_arguments", True), ("ng004_partial_arguments_negatives", False)):
        module = checker_fixture(name)
        fn = module.weighted if found else module.standardised
        params = dict(module.linear.named_parameters())
        v = {k: torch.ones_like(p) for k, p in params.items()}
        grads = jacrev(lambda p: fn(module.linear, p, x))(params)
        reverse = sum((grads[k] * v[k]).sum() for k in grads)
        assert (not torch.allclose(module.parameter_tangent(x, v), reverse)) == found, name
        field = dict(module.field.named_parameters())
        w = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
        reverse = jacrev(lambda xx: torch.func.functional_call(module.field, field, (xx, t)))(x) @ w
        assert (not torch.allclose(module.input_tangent(x, t, w), reverse)) == found, name


def test_a_teacher_run_on_what_no_transform_varies():
    """fixtures/checker/ng004_teacher_calls_negatives.py: the teacher's outputs and the recorded
    loss carry no derivative of the student's parameters, so forward and reverse mode agree; in
    ng004_given_modules.py the module given runs on the input the transform varies, and they do not."""
    module = checker_fixture("ng004_teacher_calls_negatives")
    params = {k: v.detach() for k, v in module.distiller.student.named_parameters()}
    x = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64).reshape(2, 3)
    forward = module.jacobian(params, x)
    reverse = jacrev(lambda p: module.distiller.loss(p, x))(params)
    assert all(torch.allclose(forward[k], reverse[k]) for k in params)
    params = {k: v.detach() for k, v in module.state.online.named_parameters()}
    forward = module.byol_jacobian(params, x)
    reverse = jacrev(lambda p: module.state.loss_fn(p, x))(params)
    assert all(torch.allclose(forward[k], reverse[k]) for k in params)

    given = checker_fixture("ng004_given_modules")
    assert not torch.allclose(given.jacobian(X), jacrev(given.model)(X))


def test_traced_regions_on_what_nothing_traced_varies():
    """fixtures/checker/ng005_traced_constants_negatives.py: random noise scaled by a default
    argument, and a frequency table from a number of bands, carry no derivative: the traced graphs
    give eager mode's input gradients."""
    module = checker_fixture("ng005_traced_constants_negatives")
    h = torch.linspace(-1.0, 2.0, 6, dtype=torch.float64).reshape(2, 3)
    graph = module.traced_step(h)
    x1, x2 = h.clone().requires_grad_(), h.clone().requires_grad_()
    torch.manual_seed(1)
    graph(x1).backward()
    torch.manual_seed(1)
    module.step(x2).backward()
    assert torch.allclose(x1.grad, x2.grad)
    x1, x2 = h.clone().requires_grad_(), h.clone().requires_grad_()
    module.encoding(x1).pow(2).sum().backward()
    module.Encoding(4)(x2).pow(2).sum().backward()
    assert torch.allclose(x1.grad, x2.grad)


def test_a_transform_in_a_method_of_what_an_object_was_given_runs_despite_the_region():
    """fixtures/checker/ng001_held_objects.py and fixtures/projects/held_objects: `jacfwd` in the
    method `evaluate` calls on the residual its object was given computes under the region what it
    computes without it (NG001), where autograd itself under `no_grad` has no graph; so does `grad`
    in the force function an integrator of another module was built with."""
    module = checker_fixture("ng001_held_objects")
    z = X.clone()
    assert torch.allclose(module.evaluator.evaluate(z), 3 * z ** 2 - z)
    with torch.no_grad():
        assert not module.field(z.clone().requires_grad_()).requires_grad
    project = Path(__file__).parent / "fixtures" / "projects" / "held_objects"
    sys.path.insert(0, str(project))
    try:
        evaluator = importlib.import_module("pkg.evaluator")
        physics = importlib.import_module("pkg.physics")
        integrators = importlib.import_module("pkg.integrators")
        assert torch.allclose(evaluator.Evaluator(physics.Residual()).evaluate(z), 3 * z ** 2 - z)
        # pkg/integrators.py: the force `grad` computes under `run`'s region is the one it computes without it
        step = z - 0.1 * 3 * z ** 2
        assert torch.allclose(integrators.Verlet(physics.field, physics.FORCES["grad"]).run(z, steps=1), step)
        assert torch.allclose(integrators.Stepper(physics.field, physics.difference_forces).run(z), step, atol=1e-4)
    finally:
        sys.path.remove(str(project))
        for name in [name for name in sys.modules if name == "pkg" or name.startswith("pkg.")]:
            del sys.modules[name]


def test_a_callback_an_instance_is_called_with_runs_its_transform_despite_the_region():
    """fixtures/projects/instance_callbacks: the closure `sharpener()` makes, handed to a `Pipe`
    whose `__call__` runs it under `@torch.no_grad()`, differentiates there as without the region
    (NG001), where autograd itself there has no graph; `torch.tanh` handed the same way
    differentiates nothing."""
    project = Path(__file__).parent / "fixtures" / "projects" / "instance_callbacks"
    sys.path.insert(0, str(project))
    try:
        sharpen = importlib.import_module("scripts.sharpen")
        pipe = importlib.import_module("pkg.pipe")
        assert torch.allclose(sharpen.main(), torch.diag(torch.cos(torch.ones(3))))
        with torch.no_grad():
            assert not torch.sin(X.clone().requires_grad_()).requires_grad
        assert not pipe.Pipe()(X.clone().requires_grad_(), callback=torch.tanh).requires_grad
    finally:
        sys.path.remove(str(project))
        for name in [name for name in sys.modules if name.partition(".")[0] in ("pkg", "scripts")]:
            del sys.modules[name]


def test_a_transform_stored_or_made_at_the_top_level_runs_despite_the_region():
    """fixtures/checker/ng001_held_transforms.py: the score `__init__` stores on `self`, and the one
    made at the module's top level, differentiate under `no_grad` as without it (NG001), where
    autograd itself there has no graph; the look-alike `vmap(logp)` differentiates nothing."""
    module = checker_fixture("ng001_held_transforms")
    x = torch.stack([X, 2 * X])
    assert torch.allclose(module.Sampler(module.logp).step(x), 0.9 * x)
    with torch.no_grad():
        assert torch.allclose(module.langevin(x), 0.9 * x)
        assert not module.logp(x.clone().requires_grad_()).requires_grad
        assert not module.energy(x.clone().requires_grad_()).requires_grad
    moved, _ = module.sample(x, n=1)
    assert torch.allclose(moved, 0.8 * x)


def test_one_call_runs_a_transform_and_a_backward_the_region_changes():
    """fixtures/checker/calls_running_two_findings.py: under the region the transform computes what it
    computes without it (NG001), and the backward has no graph (NG003)."""
    module = checker_fixture("calls_running_two_findings")
    x = torch.stack([X, -X])
    assert torch.allclose(module.attack(x)[0], x + 0.1)
    with torch.no_grad():
        assert torch.allclose(module.fgsm(x), x + 0.1)
    for call in (module.evaluate, module.robust_attack):
        with pytest.raises(RuntimeError, match="does not require grad"):
            call(x)


def test_backward_through_an_element_a_region_computes():
    """fixtures/checker/ng003_tuple_elements.py: the key the encoder computes under `no_grad` has no
    graph, and differentiating it raises; the loss beside it has one."""
    module = checker_fixture("ng003_tuple_elements")
    encoder, x = module.MomentumEncoder(), torch.ones(2, 3)
    module.contrastive_step(encoder, x)
    assert encoder.query.weight.grad is not None
    with pytest.raises(RuntimeError, match="does not require grad"):
        module.key_norm(encoder, x)


def test_a_transform_in_the_forward_of_a_model_handed_to_a_decorated_function():
    """fixtures/checker/ng001_given_models.py: `jacrev` in a layer of the flow `encode` is given
    computes under `@torch.no_grad()` the log-determinant it computes without it (NG001)."""
    module = checker_fixture("ng001_given_models")
    torch.manual_seed(0)
    flow, x = module.Flow(3, 2), torch.randn(4, 3)
    (_, inside), (_, outside) = module.encode(flow, x), module.encode.__wrapped__(flow, x)
    assert torch.allclose(inside, outside) and not inside.requires_grad and outside.requires_grad


def test_a_model_from_a_container_class_registry():
    """fixtures/checker/ng004_container_registry.py: the model built by name from a `dict`
    subclass its decorator fills disagrees between forward and reverse mode; the look-alike agrees."""
    module = checker_fixture("ng004_container_registry")
    for name, found in (("normalised", True), ("plain", False)):
        assert (not torch.allclose(module.jacobian(name, X), jacrev(module.build(name))(X))) == found, name


def test_a_nested_transform_varies_what_its_call_passes():
    """fixtures/checker/ng004_nested_transforms_negatives.py: the forward-over-reverse product
    equals reverse over reverse, the region computing from the labels only."""
    module = checker_fixture("ng004_nested_transforms_negatives")
    w, v = X.clone(), torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
    x = torch.linspace(-1.0, 1.0, 12, dtype=torch.float64).reshape(4, 3)
    y = torch.tensor([0.5, -1.0, 2.0, 0.0], dtype=torch.float64)
    assert torch.allclose(module.hvp(w, x, y, v), jacrev(grad(module.loss))(w, x, y) @ v)


def test_a_model_a_helper_hands_back_then_traced():
    """fixtures/checker/ng005_helper_returned_models.py: the trace of the model `attach` hands back
    differentiates through its region, where eager mode does not; the look-alike's agree."""
    module = checker_fixture("ng005_helper_returned_models")
    assert traced_minus_eager(module.Net(), module.traced) > 0.1
    assert traced_minus_eager(module.Plain(), module.plain) == 0


def test_backward_through_what_an_index_picks_from_a_region():
    """fixtures/checker/ng003_indexed_values.py: a score gathered from logits computed under
    `no_grad` has no graph, and differentiating it raises."""
    module = checker_fixture("ng003_indexed_values")
    model = torch.nn.Linear(3, 4).double()
    x = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64).reshape(2, 3)
    with pytest.raises(RuntimeError, match="does not require grad"):
        module.saliency(model, x, torch.tensor([0, 2]))
    with pytest.raises(RuntimeError, match="does not require grad"):
        module.picked(model, x, torch.tensor([1]))


def test_backward_through_values_made_from_literals_and_a_region():
    """fixtures/checker/ng003_made_values.py: labels, a weight or a target made from literals add
    no graph to logits computed under `no_grad`: backward raises; a target that requires grad, or
    is made a leaf, gets its gradient, and a list or zeros later given values with a graph have one."""
    module = checker_fixture("ng003_made_values")
    model = torch.nn.Linear(3, 4).double()
    x = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64).reshape(2, 3)
    for raising in (module.smoke_test, module.regression_step):
        with pytest.raises(RuntimeError, match="does not require grad"):
            raising(model, x)
    for learning in (module.learned_target, module.target_made_a_leaf):
        assert learning(model, x).abs().sum() > 0
    for with_a_graph in (module.gathered, module.copied_into):
        with_a_graph(model, x)
        assert model.weight.grad.abs().sum() > 0
        model.zero_grad()


def test_backward_on_what_a_region_computes_inline():
    """fixtures/checker/ng003_computed_inline.py: `torch.autograd.grad(energy(x).sum(), x)` and
    `(model(x) ** 2).mean().backward()` inside `no_grad` raise; the look-alikes give gradients."""
    module = checker_fixture("ng003_computed_inline")
    model = torch.nn.Linear(3, 1).double()
    x = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64).reshape(2, 3)
    energy = lambda z: (z ** 2).sum(-1)
    for raising in (lambda: module.langevin(energy, x.clone()), lambda: module.probe(model, x)):
        with pytest.raises(RuntimeError, match="does not require grad"):
            raising()
    assert not torch.equal(module.langevin_enabled(energy, x.clone()), x)
    for given in (module.given_before, module.through_an_enabling_call):
        assert given(model, x.clone().requires_grad_()).abs().sum() > 0


def test_backward_through_a_list_filled_in_a_region():
    """fixtures/checker/ng003_filled_lists.py: `torch.cat(preds)` of a list filled under `no_grad`
    has no graph; with one more element that has one, or filled by another function too, it does."""
    module = checker_fixture("ng003_filled_lists")
    model = torch.nn.Linear(3, 1).double()
    batches = torch.linspace(-1.0, 1.0, 12, dtype=torch.float64).reshape(2, 2, 3)
    with pytest.raises(RuntimeError, match="does not require grad"):
        module.predictions(model, batches)
    for with_a_graph in (module.with_one_more, module.handed_on):
        with_a_graph(model, batches)
        assert model.weight.grad.abs().sum() > 0
        model.zero_grad()


def test_a_closure_calling_what_its_maker_got_handed_to_a_subclass_method():
    """fixtures/checker/ng004_closure_handed_on.py: the loss the closure calls runs under `jvp` in
    `ForwardOverReverse.hvp`, which ignores its region: forward over reverse and reverse over
    reverse disagree; the loss only evaluated eagerly is not reported (its region changes no
    derivative anyone takes)."""
    module = checker_fixture("ng004_closure_handed_on")
    x = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    v = torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
    forward, reverse = module.both(x, v)
    assert not torch.allclose(forward, reverse)
    assert module.eagerly(x).item() > 0


def test_backward_through_a_method_of_an_object_given_that_computes_in_a_region():
    """fixtures/checker/ng003_given_objects.py: backward through `certifier.margin(x)` raises;
    through the look-alike's `score`, it gives the input's gradient."""
    module = checker_fixture("ng003_given_objects")
    x = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64).reshape(2, 3)
    with pytest.raises(RuntimeError, match="does not require grad"):
        module.attack_direction(module.certifier, x)
    assert module.score_direction(module.certifier, x).abs().sum() > 0


def test_regions_whose_values_leave_only_as_indices():
    """fixtures/checker/ng004_indices_negatives.py: the nearest code's index and the code picked by
    it carry no derivative of the input: forward mode agrees with reverse mode."""
    module = checker_fixture("ng004_indices_negatives")
    z = torch.linspace(-0.9, 0.7, 6, dtype=torch.float64).reshape(2, 3)
    assert torch.allclose(module.jacobian(z), jacrev(module.quantiser)(z))


def test_a_closure_applying_a_transform_called_in_a_region():
    """fixtures/checker/ng001_called_closures.py: the Hessian-vector product the conjugate gradient
    calls under `no_grad` is the one computed outside it (12 w^2 v): the region is ignored."""
    module = checker_fixture("ng001_called_closures")
    w, v = X.clone(), torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
    assert torch.allclose(module.solve(w, v)[0], 12 * w ** 2 * v)


def test_a_method_decorated_by_a_decorator_entering_a_region():
    """fixtures/checker/ng004_decorated_methods.py: the wrapper of `@without_autograd` runs the
    method in its region, which forward mode ignores: jacfwd disagrees with jacrev. With the
    look-alike decorator (`counted_only`), the two agree."""
    module = checker_fixture("ng004_decorated_methods")
    assert not torch.allclose(module.jacobian(X), jacrev(module.Model())(X))
    assert torch.allclose(jacfwd(module.Model(counted_only=True))(X), jacrev(module.Model(counted_only=True))(X))


def test_a_model_handed_back_by_a_call_that_unwraps_it_then_traced():
    """fixtures/checker/ng005_unwrapped_arguments.py: the trace of what `unwrap` hands back
    differentiates through the model's region, where eager mode does not; the head a call makes
    of the model has no region, and its trace agrees with eager mode."""
    module = checker_fixture("ng005_unwrapped_arguments")
    assert traced_minus_eager(module.model, module.traced) > 0.1
    head = module.nn.Linear(3, 3).double()
    head.load_state_dict(module.head.state_dict())
    assert traced_minus_eager(head, module.head) == 0


def test_a_decorator_wrapper_runs_only_the_method_it_decorates():
    """fixtures/checker/ng003_decorated_methods.py: under `no_grad`, calling the model runs `forward`
    through the wrappers, which computes; `refine`, wrapped by the same decorators, raises there."""
    module = checker_fixture("ng003_decorated_methods")
    x = torch.linspace(-1.0, 1.0, 3, dtype=torch.float64)
    assert float(module.evaluate(x)) == pytest.approx(float((x ** 2).sum()) * 1.0)
    with pytest.raises(RuntimeError, match="does not require grad"):
        module.polish(x)
    assert module.acquisition.refine(x).shape == x.shape  # outside the region it runs


def test_an_operation_differentiated_where_a_caller_region_holds():
    """fixtures/checker/ng003_inline_outputs.py: `torch.autograd.grad((x ** 2).sum(), x)` raises in a
    caller's `no_grad`; under `enable_grad()`, or on a loss the caller made before its region, it runs."""
    module = checker_fixture("ng003_inline_outputs")
    x = torch.linspace(-1.0, 1.0, 3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="does not require grad"):
        module.polish(x)
    assert torch.allclose(module.guarded(x), x - 0.2 * x)
    assert torch.allclose(module.given(x.clone()), 2 * x)


def test_regions_of_what_forward_mode_does_not_vary():
    """fixtures/checker/ng004_unvaried_negatives.py: each region computes from what the transform
    does not differentiate (a default step count, weights, the batch beside the parameters), and
    forward mode agrees with reverse mode."""
    module = checker_fixture("ng004_unvaried_negatives")
    assert torch.allclose(module.forward_sde, jacrev(module.sde)(module.X))
    contractive = module.Contractive()
    assert torch.allclose(jacfwd(contractive)(module.X), jacrev(contractive)(module.X))
    reverse = grad(lambda p: module.objective(module.standardised, p, module.X))(module.params)
    assert torch.allclose(module.forward_standardised, sum((g * module.tangents[k]).sum() for k, g in reverse.items()))


def test_a_partial_given_to_a_helper_that_applies_jvp():
    """fixtures/checker/ng004_partial_given_to_helpers.py: the tangent `jvp` pushes through the
    weight norm the region computes differs from the product of reverse mode's gradient."""
    module = checker_fixture("ng004_partial_given_to_helpers")
    reverse = grad(lambda p: module.objective(module.model, p, module.X))(module.params)
    assert abs(float(module.forward) - float(sum((g * module.tangents[k]).sum() for k, g in reverse.items()))) > 1e-3


def test_regions_that_only_add_to_what_nothing_traced_reads():
    """fixtures/checker/ng005_added_state.py: the trace of the model that keeps a statistic,
    a history and running sums differentiates as eager mode does; the running mean its forward reads
    gives the trace a graph eager mode does not have."""
    module = checker_fixture("ng005_added_state")
    torch.manual_seed(0)  # the weights the fixture traced with
    recorded = module.Recorded()
    assert traced_minus_eager(recorded, module.recorded) == 0
    traced = torch.jit.trace(module.RunningMean(), (X,), check_trace=False)
    traced.mean.zero_()  # (tracing ran it once) each call below starts from a running mean at zero
    assert traced_minus_eager(module.RunningMean(), traced) > 0.1


def test_a_classmethod_of_a_base_class_builds_the_class_it_is_called_on():
    """fixtures/checker/ng004_classmethod_builders.py: `from_config` called on a registered subclass
    builds that subclass, whose region forward mode differentiates through and reverse mode does
    not; the look-alike built by name is the base class's own `Plain`, with no region."""
    module = checker_fixture("ng004_classmethod_builders")
    assert type(module.by_name) is module.Scaled and type(module.direct) is module.Scaled
    assert float((module.forward - module.reverse).abs().max()) > 0.1
    assert torch.allclose(module.forward_direct, module.forward)
    assert type(module.plain) is module.Plain and torch.allclose(module.forward_plain, module.reverse_plain)


def test_a_registry_class_hands_out_its_classes_from_getitem():
    """fixtures/checker/ng004_getitem_registry.py: the class `build` makes through `self[name]`
    changes forward mode's Jacobian; the fallback registry's `Identity` has no region to change."""
    module = checker_fixture("ng004_getitem_registry")
    assert type(module.built) is module.Scaled and type(module.indexed) is module.Scaled
    assert float((module.forward - module.reverse).abs().max()) > 0.1
    assert torch.allclose(module.forward_indexed, module.forward)
    assert type(module.other) is module.Identity and torch.allclose(module.forward_other, module.reverse_other)


def test_a_parameter_no_call_tells_of_holds_the_classes_that_have_what_it_is_asked():
    """fixtures/checker/ng004_typed_by_use.py: called as a script would, `flow_jacobian` with a
    `Flow` and `directional` with a `Learner` differ from reverse mode (the regions cut what forward
    mode differentiates); `unroll_jacobian` cannot be given a `Rollout` (it has no `reset`), and
    `step_jacobian`'s only caller gives it a `Plain`, whose Jacobian needs no region."""
    module = checker_fixture("ng004_typed_by_use")
    z = module.Z
    flow = module.Flow()
    assert float((module.flow_jacobian(flow, z) - torch.func.jacrev(flow.solve)(z)).abs().max()) > 0.1
    learner, v = module.Learner(), torch.ones_like(z)
    reverse = torch.dot(torch.func.grad(learner.meta_loss)(z), v)
    assert abs(float(module.directional(learner, z, v) - reverse)) > 0.1
    with pytest.raises(AttributeError):
        module.unroll_jacobian(module.Rollout(), z)
    assert torch.allclose(module.plain_jacobian, torch.diag(z.cos()))


def test_a_region_whose_values_leave_only_as_numbers_and_booleans_changes_nothing():
    """fixtures/checker/ng004_cut_after_region.py: regions read after only through `int(...)`,
    `bool(...)` and `.item()` give the same Jacobian in forward and reverse mode; the look-alike
    that also multiplies by the value does not."""
    module = checker_fixture("ng004_cut_after_region")
    assert torch.allclose(module.forward, module.reverse)
    assert float((module.forward_scaled - module.reverse_scaled).abs().max()) > 0.1


def test_a_context_manager_function_yielding_in_a_region_runs_the_with_body_in_it():
    """fixtures/checker/ng00[14]_context_manager_functions.py: the body of `with evaluating(net):`
    runs under `no_grad` (NG001: `jacrev` in it still differentiates; NG004: forward mode differs
    from reverse mode, also where `maybe_frozen(True)` enters its region); the look-alikes' bodies
    run with grad on, and their Jacobians agree."""
    module = checker_fixture("ng004_context_manager_functions")
    with module.evaluating(module.NET):
        assert not torch.is_grad_enabled()
    transformed = checker_fixture("ng001_context_manager_functions")
    assert torch.allclose(transformed.teacher_jacobian(module.X), transformed.NET.weight)
    assert torch.allclose(transformed.timed_jacobian(module.X), transformed.NET.weight)
    assert float((module.forward - module.reverse).abs().max()) > 0.1
    assert torch.allclose(module.forward_thawed, module.reverse_thawed)
    assert float((module.forward_maybe - module.reverse_maybe).abs().max()) > 0.1
    with module.timed("t"), module.maybe_frozen(False):
        assert torch.is_grad_enabled()


def test_a_callback_given_the_trainer_by_a_list_differentiates_what_it_computes_without_grad():
    """fixtures/checker/ng003_typed_by_use.py: the trainer runs `GradientProbe` from its list, and
    the probe's `autograd.grad` raises on `validation_loss`; `Scorer`'s loss keeps its graph, and
    `SchedulerProbe` cannot be given a `Trainer` (it has no `scheduler`)."""
    module = checker_fixture("ng003_typed_by_use")
    trainer = module.Trainer(torch.nn.Linear(3, 1), [module.GradientProbe()])
    with pytest.raises(RuntimeError, match="does not require grad"):
        trainer.fit()
    assert all(grad is not None for grad in module.score(torch.nn.Linear(3, 1)))
    with pytest.raises(AttributeError):
        module.SchedulerProbe().on_step_end(trainer)


def test_a_registry_entry_called_by_name_in_a_region_runs_in_its_mode():
    """fixtures/checker/ng003_registry_calls.py: `ATTACKS["fgsm"]` called under `no_grad` raises
    where it differentiates; `pgd` turns grad back on, and the registry called outside a region
    runs with grad on."""
    module = checker_fixture("ng003_registry_calls")
    model, x, y = torch.nn.Linear(3, 2), torch.randn(4, 3), torch.tensor([0, 1, 0, 1])
    with pytest.raises(RuntimeError, match="does not require grad"):
        module.robust_accuracy(model, x, y, "fgsm")
    assert 0 <= float(module.robust_accuracy(model, x, y, "pgd")) <= 1
    assert module.adversarial_batch(model, x, y, "fgsm").shape == x.shape


def test_super_in_a_mixin_runs_the_next_class_of_the_objects_mro():
    """fixtures/checker/ng005_mixin_super.py: the traced `Block` (`Residual` then `Body`) drops
    `Norm`'s region, so its gradients differ from eager mode's; the traced `Plain` has no region
    and agrees."""
    module = checker_fixture("ng005_mixin_super")
    assert isinstance(module.block, module.Body) and isinstance(module.block, module.Residual)
    x1, x2 = module.X.clone().requires_grad_(), module.X.clone().requires_grad_()
    module.traced_block(x1).sum().backward()
    module.block(x2).sum().backward()
    assert float((x1.grad - x2.grad).abs().max()) > 0.1
    x3, x4 = module.X.clone().requires_grad_(), module.X.clone().requires_grad_()
    module.traced_plain(x3).sum().backward()
    module.plain(x4).sum().backward()
    assert torch.allclose(x3.grad, x4.grad)


def test_super_runs_the_base_method_on_the_same_object():
    """fixtures/checker/ng004_super_calls.py: `Base.forward`, run by `super().forward(x)`, calls
    `Centered.features`, whose region makes forward mode differ from reverse mode; `Smooth`'s
    override has none, and `Unbuilt`'s is never run."""
    module = checker_fixture("ng004_super_calls")
    assert float((module.forward - module.reverse).abs().max()) > 0.1
    assert torch.allclose(module.forward_smooth, module.reverse_smooth)
