"""A small meta-learning script with the mistakes lint-nograd exists to catch.

Run `lint-nograd check examples/` to see them, `lint-nograd fix --diff --unsafe-fixes examples/` for the fixes.
"""
import torch
from torch import nn
from torch.func import functional_call, grad, jacfwd, vmap


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def forward(self, x):
        return self.layer(x).squeeze(-1)


def task_loss(params, model, x, y):
    prediction = functional_call(model, params, (x,))
    with torch.no_grad():
        scale = prediction.std() + 1e-6  # meant as a constant
    return (((prediction - y) / scale) ** 2).mean()


def inner_step(params, model, x, y, lr=0.1):
    grads = grad(task_loss)(params, model, x, y)
    return {name: p - lr * grads[name] for name, p in params.items()}


def input_sensitivity(model, x):
    def predict(inputs):
        with torch.no_grad():
            baseline = model(inputs).mean()
        return model(inputs) - baseline

    return vmap(jacfwd(predict))(x)


@torch.no_grad()
def evaluate(model, params, x, y):
    loss = task_loss(params, model, x, y)
    per_example = vmap(grad(task_loss), in_dims=(None, None, 0, 0))(params, model, x, y)
    loss.backward()  # fails: `loss` was computed under no_grad
    return loss, per_example


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Regressor()
    params = dict(model.named_parameters())
    x, y = torch.randn(8, 4), torch.randn(8)
    adapted = inner_step(params, model, x, y)
    print(input_sensitivity(model, x).shape)
