#!/usr/bin/env python3
"""The CNNs of the ONNX GPU comparison, at the sizes people run them: torchvision's
MobileNetV3-small (1000 classes, 224x224, symbolic batch) and the YOLO-style detector of
tests/reference/make_onnx_references.py at 640x640. Random weights (seed 0, batch-norm statistics
randomised so folding matters). Writes, into OUT:

  mobilenet_v3_small.onnx, yolo_640.onnx    what vrun runs (torch.onnx.export, opset 14 / 13)
  mobilenet_v3_small.pt, yolo_640.pt        the same modules with the same weights for PyTorch
                                            (torch.jit.trace: a machine without torchvision
                                            still runs them; torch_cnn.py prefers eager modules)
  *.state.pt                                the state dicts for the eager modules

Needs Debian's python3-torch and python3-torchvision (/usr/bin/python3):
    /usr/bin/python3 bench/onnx/make_models.py OUT
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))


def main(out):
    import torch
    import torchvision
    from make_onnx_references import randomize_bn, yolo_style_detector

    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    models = {
        "mobilenet_v3_small": (torchvision.models.mobilenet_v3_small(num_classes=1000), (1, 3, 224, 224), 14,
                               ["image"], ["logits"], {"image": {0: "batch"}, "logits": {0: "batch"}}),
        "yolo_640": (yolo_style_detector(), (1, 3, 640, 640), 13, ["images"], ["p3", "p4"], None),
    }
    for name, (model, shape, opset, ins, outs, dyn) in models.items():
        randomize_bn(model)
        model.eval()
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.onnx.export(model, (x,), os.path.join(out, name + ".onnx"), input_names=ins, output_names=outs,
                              opset_version=opset, dynamic_axes=dyn, do_constant_folding=True)
            torch.jit.save(torch.jit.trace(model, (x,)), os.path.join(out, name + ".pt"))
        torch.save(model.state_dict(), os.path.join(out, name + ".state.pt"))
        print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, input {shape}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
