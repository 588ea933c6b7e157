"""Small, architecturally faithful versions of well-known nets (torchvision is not available).

Each builder returns ``(model.eval(), example_args)``. Weights, BatchNorm running statistics and
inputs come from a seeded ``torch.Generator``, so every call yields the same model and inputs
without touching the global RNG.
"""

from __future__ import annotations

import torch
from torch import nn

_SEED = 0


def _randomize(model: nn.Module, g: torch.Generator) -> nn.Module:
    """Kaiming-normal weights keep activations near unit scale through deep stacks (so the
    comparison tolerances mean something), and random running stats make eval-mode BatchNorm a
    real affine transform rather than the identity."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu", generator=g)
            if m.bias is not None:
                nn.init.uniform_(m.bias, -0.1, 0.1, generator=g)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5, generator=g)
            nn.init.uniform_(m.bias, -0.2, 0.2, generator=g)
            with torch.no_grad():
                m.running_mean.normal_(0.0, 0.3, generator=g)
                m.running_var.uniform_(0.5, 2.0, generator=g)
    return model.eval()


def _build(model: nn.Module, *input_shapes: tuple[int, ...]) -> tuple[nn.Module, tuple]:
    g = torch.Generator().manual_seed(_SEED)
    model = _randomize(model, g)
    return model, tuple(torch.randn(shape, generator=g) for shape in input_shapes)


def mlp() -> tuple[nn.Module, tuple]:
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return _build(model, (8, 64))


class AlexNet(nn.Module):
    """torchvision's AlexNet with every width divided by 8 (classifier by 16)."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(8, 24, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(24, 48, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(48, 32, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5),
            nn.Linear(32 * 6 * 6, 256),
            nn.ReLU(inplace=True),
            nn.Dropout(p=0.5),
            nn.Linear(256, 256),
            nn.ReLU(inplace=True),
            nn.Linear(256, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def alexnet() -> tuple[nn.Module, tuple]:
    return _build(AlexNet(), (2, 3, 224, 224))


# VGG-11 ("A") with widths divided by 8; "M" is a 2x2 max pool.
_VGG_CFG = [8, "M", 16, "M", 32, 32, "M", 64, 64, "M", 64, 64, "M"]


class VGG(nn.Module):
    def __init__(self, batch_norm: bool, num_classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = []
        in_channels = 3
        for v in _VGG_CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
                continue
            layers.append(nn.Conv2d(in_channels, v, kernel_size=3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(v))
            layers.append(nn.ReLU(inplace=True))
            in_channels = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(in_channels * 7 * 7, 128),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(128, 128),
            nn.ReLU(True),
            nn.Dropout(p=0.5),
            nn.Linear(128, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def vgg(batch_norm: bool = False) -> tuple[nn.Module, tuple]:
    return _build(VGG(batch_norm), (2, 3, 224, 224))


def _conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = _conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """ResNet v1.5: the stride sits on the 3x3 conv."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = _conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, block: type[nn.Module], layers: list[int], base_width: int, num_classes: int):
        super().__init__()
        self.inplanes = base_width
        self.conv1 = nn.Conv2d(3, base_width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(base_width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, base_width, layers[0])
        self.layer2 = self._make_layer(block, base_width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, base_width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, base_width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(base_width * 8 * block.expansion, num_classes)

    def _make_layer(self, block: type[nn.Module], planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                _conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def resnet18() -> tuple[nn.Module, tuple]:
    return _build(ResNet(BasicBlock, [2, 2, 2, 2], base_width=16, num_classes=10), (1, 3, 64, 64))


def resnet50() -> tuple[nn.Module, tuple]:
    """Full-size ResNet-50 (25.6M parameters) for benchmarks."""
    return _build(ResNet(Bottleneck, [3, 4, 6, 3], base_width=64, num_classes=1000), (1, 3, 224, 224))


# DCGAN tutorial sizes with ngf = ndf = 16 (the tutorial uses 64): latent nz, image channels nc.
_NZ, _NC, _NGF, _NDF = 100, 3, 16, 16


def dcgan_generator() -> tuple[nn.Module, tuple]:
    model = nn.Sequential(
        nn.ConvTranspose2d(_NZ, _NGF * 8, 4, 1, 0, bias=False),
        nn.BatchNorm2d(_NGF * 8),
        nn.ReLU(True),
        nn.ConvTranspose2d(_NGF * 8, _NGF * 4, 4, 2, 1, bias=False),
        nn.BatchNorm2d(_NGF * 4),
        nn.ReLU(True),
        nn.ConvTranspose2d(_NGF * 4, _NGF * 2, 4, 2, 1, bias=False),
        nn.BatchNorm2d(_NGF * 2),
        nn.ReLU(True),
        nn.ConvTranspose2d(_NGF * 2, _NGF, 4, 2, 1, bias=False),
        nn.BatchNorm2d(_NGF),
        nn.ReLU(True),
        nn.ConvTranspose2d(_NGF, _NC, 4, 2, 1, bias=False),
        nn.Tanh(),
    )
    return _build(model, (2, _NZ, 1, 1))


def dcgan_discriminator() -> tuple[nn.Module, tuple]:
    model = nn.Sequential(
        nn.Conv2d(_NC, _NDF, 4, 2, 1, bias=False),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(_NDF, _NDF * 2, 4, 2, 1, bias=False),
        nn.BatchNorm2d(_NDF * 2),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(_NDF * 2, _NDF * 4, 4, 2, 1, bias=False),
        nn.BatchNorm2d(_NDF * 4),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(_NDF * 4, _NDF * 8, 4, 2, 1, bias=False),
        nn.BatchNorm2d(_NDF * 8),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(_NDF * 8, 1, 4, 1, 0, bias=False),
        nn.Sigmoid(),
    )
    return _build(model, (2, _NC, 64, 64))


class SuperResolutionNet(nn.Module):
    """The net from PyTorch's "super resolution" ONNX export tutorial."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor**2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


def super_resolution(upscale_factor: int = 3) -> tuple[nn.Module, tuple]:
    return _build(SuperResolutionNet(upscale_factor), (1, 1, 32, 32))


# The nets the tests export, by name; resnet50 is left out (benchmark-sized).
TEST_NETS = {
    "mlp": mlp,
    "alexnet": alexnet,
    "vgg": vgg,
    "vgg_bn": lambda: vgg(batch_norm=True),
    "resnet18": resnet18,
    "dcgan_generator": dcgan_generator,
    "dcgan_discriminator": dcgan_discriminator,
    "super_resolution": super_resolution,
}
