// python/src/tensor_arg.cc: buffer protocol and DLPack -> posenc views.
// Contract and lifetime rules: tensor_arg.h.
#include "tensor_arg.h"

#include <dlpack/dlpack.h>  // Debian libdlpack-dev (DLPack 0.6, the ABI torch 1.10+ exports)

#include <string>

#include "posenc/error.h"

namespace posenc::python {
namespace {

enum class Kind : std::uint8_t { kFloat, kBFloat, kInt, kUInt, kOther };

// A strided array of any element type, before it becomes a float view or
// is copied into int64.
struct Raw {
  void* data = nullptr;
  Kind kind = Kind::kOther;
  int bits = 0;
  std::string type_text;  // for messages: "float32", "int64", "format 'O'"
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements
  std::shared_ptr<void> keep;
};

std::string KindText(Kind kind, int bits) {
  switch (kind) {
    case Kind::kFloat:
      return "float" + std::to_string(bits);
    case Kind::kBFloat:
      return "bfloat" + std::to_string(bits);
    case Kind::kInt:
      return "int" + std::to_string(bits);
    case Kind::kUInt:
      return "uint" + std::to_string(bits);
    case Kind::kOther:
      break;
  }
  return "unsupported";
}

std::string TypeName(py::handle obj) {
  return py::str(py::type::handle_of(obj).attr("__qualname__")).cast<std::string>();
}

// Struct-module format of a native-endian scalar -> kind.
Kind KindOfFormat(std::string format, std::string& text, int bits) {
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<')) {
    format.erase(0, 1);
  }
  Kind kind = Kind::kOther;
  if (format.size() == 1) {
    switch (format[0]) {
      case 'e':
      case 'f':
      case 'd':
        kind = Kind::kFloat;
        break;
      case 'b':
      case 'h':
      case 'i':
      case 'l':
      case 'q':
      case 'n':
        kind = Kind::kInt;
        break;
      case 'B':
      case 'H':
      case 'I':
      case 'L':
      case 'Q':
      case 'N':
        kind = Kind::kUInt;
        break;
      default:
        break;
    }
  }
  text = kind == Kind::kOther ? "buffer format '" + format + "'" : KindText(kind, bits);
  return kind;
}

Raw FromBuffer(py::handle obj, std::string_view arg, Access access) {
  auto buffer = py::reinterpret_borrow<py::buffer>(obj);
  std::shared_ptr<py::buffer_info> info;
  try {
    info = std::make_shared<py::buffer_info>(buffer.request(access == Access::kWrite));
  } catch (py::error_already_set& e) {
    if (access == Access::kWrite) {
      throw InvalidArgument(ArgMessage(arg, "a read-only " + TypeName(obj),
                                       "a writable array (e.g. numpy.array(x, copy=True))"));
    }
    throw InvalidArgument(
        ArgMessage(arg, TypeName(obj), "a readable buffer: " + std::string(e.what())));
  }
  Raw raw;
  raw.data = info->ptr;
  raw.bits = static_cast<int>(info->itemsize * 8);
  raw.kind = KindOfFormat(info->format, raw.type_text, raw.bits);
  for (py::ssize_t d = 0; d < info->ndim; ++d) {
    raw.shape.push_back(info->shape[static_cast<std::size_t>(d)]);
    const py::ssize_t stride = info->strides[static_cast<std::size_t>(d)];
    Require(info->itemsize > 0 && stride % info->itemsize == 0, std::string(arg) + ".strides",
            stride,
            "byte strides that are multiples of the item size " + std::to_string(info->itemsize));
    raw.strides.push_back(stride / info->itemsize);
  }
  raw.keep = std::move(info);
  return raw;
}

// Takes ownership of the DLManagedTensor in a "dltensor" capsule (renaming
// it "used_dltensor" so its producer's destructor leaves it alone).
Raw FromCapsule(py::handle capsule, std::string_view arg) {
  PyObject* cap = capsule.ptr();
  if (!PyCapsule_IsValid(cap, "dltensor")) {
    const char* name = PyCapsule_GetName(cap);
    PyErr_Clear();
    throw InvalidArgument(ArgMessage(arg,
                                     std::string("a capsule named '") + (name ? name : "") + "'",
                                     "an unused DLPack capsule named 'dltensor' (each "
                                     "capsule can be consumed once)"));
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  if (PyCapsule_SetName(cap, "used_dltensor") != 0) throw py::error_already_set();
  std::shared_ptr<void> keep(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter != nullptr) m->deleter(m);
  });
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU) {  // (the message is built only when it is needed)
    Require(false, std::string(arg) + ".device",
            "DLPack device type " + std::to_string(static_cast<int>(t.device.device_type)),
            "a CPU tensor (posenc runs on the CPU; move it with .cpu())");
  }
  Raw raw;
  raw.bits = t.dtype.bits;
  switch (t.dtype.code) {
    case kDLFloat:
      raw.kind = Kind::kFloat;
      break;
    case kDLBfloat:
      raw.kind = Kind::kBFloat;
      break;
    case kDLInt:
      raw.kind = Kind::kInt;
      break;
    case kDLUInt:
      raw.kind = Kind::kUInt;
      break;
    default:
      raw.kind = Kind::kOther;
      break;
  }
  if (t.dtype.lanes != 1) raw.kind = Kind::kOther;
  raw.type_text = raw.kind == Kind::kOther ? "DLPack type code " + std::to_string(t.dtype.code) +
                                                 " x" + std::to_string(t.dtype.lanes)
                                           : KindText(raw.kind, raw.bits);
  raw.data = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;
  std::int64_t contiguous = 1;
  raw.shape.assign(t.shape, t.shape + t.ndim);
  raw.strides.assign(static_cast<std::size_t>(t.ndim), 0);
  for (int d = t.ndim - 1; d >= 0; --d) {
    raw.strides[static_cast<std::size_t>(d)] = t.strides ? t.strides[d] : contiguous;
    contiguous *= t.shape[d];
  }
  raw.keep = std::move(keep);
  return raw;
}

// torch.Tensor, when torch is imported (posenc never imports it itself).
bool IsTorchTensor(py::handle obj) {
  static PyObject* tensor_type = nullptr;  // kept alive by the torch module
  if (tensor_type == nullptr) {
    PyObject* torch = PyImport_GetModule(py::str("torch").ptr());  // new reference or null
    if (torch == nullptr) {
      PyErr_Clear();
      return false;
    }
    PyObject* type = PyObject_GetAttrString(torch, "Tensor");
    Py_DECREF(torch);
    if (type == nullptr) {
      PyErr_Clear();
      return false;
    }
    tensor_type = type;
  }
  const int is = PyObject_IsInstance(obj.ptr(), tensor_type);
  if (is < 0) throw py::error_already_set();
  return is == 1;
}

// obj itself, or obj.detach() when it is a tensor that requires grad: read
// without its autograd history, refused for in-place writes.
py::object WithoutGrad(py::handle obj, std::string_view arg, Access access) {
  if (!py::hasattr(obj, "requires_grad") || !obj.attr("requires_grad").cast<bool>()) {
    return py::reinterpret_borrow<py::object>(obj);
  }
  if (access == Access::kWrite) {
    throw InvalidArgument(
        ArgMessage(arg, "a tensor that requires grad",
                   "a tensor without autograd history for in-place writes (use posenc.torch for "
                   "differentiable calls, or pass .detach())"));
  }
  return obj.attr("detach")();
}

// A torch tensor through torch.utils.dlpack.to_dlpack (torch's C function;
// Tensor.__dlpack__ is a Python method around it): the per-call path of
// posenc.torch, which converts ~16 tensors per training step.
Raw FromTorch(py::handle obj, std::string_view arg, Access access) {
  // Never released: a static py::object would be destroyed after the
  // interpreter has finalized.
  static PyObject* to_dlpack =
      py::object(py::module_::import("torch.utils.dlpack").attr("to_dlpack")).release().ptr();
  py::object capsule = py::reinterpret_borrow<py::object>(to_dlpack)(WithoutGrad(obj, arg, access));
  return FromCapsule(capsule, arg);
}

Raw RawOf(py::handle obj, std::string_view arg, Access access) {
  if (obj.is_none()) {
    throw InvalidArgument(ArgMessage(arg, "None", "an array or tensor"));
  }
  if (PyObject_CheckBuffer(obj.ptr())) return FromBuffer(obj, arg, access);
  if (PyCapsule_CheckExact(obj.ptr())) return FromCapsule(obj, arg);
  if (IsTorchTensor(obj)) return FromTorch(obj, arg, access);
  if (py::hasattr(obj, "__dlpack__")) {
    py::object capsule = WithoutGrad(obj, arg, access).attr("__dlpack__")();
    return FromCapsule(capsule, arg);
  }
  if (access == Access::kWrite) {
    throw InvalidArgument(
        ArgMessage(arg, TypeName(obj), "a writable numpy array or a tensor with __dlpack__"));
  }
  // Sequences and scalars: through numpy (a copy, for read-only inputs).
  py::object array = py::module_::import("numpy").attr("asarray")(obj);
  Raw raw = FromBuffer(array, arg, access);
  raw.keep = std::make_shared<std::pair<std::shared_ptr<void>, py::object>>(raw.keep, array);
  return raw;
}

DType FloatDType(const Raw& raw, std::string_view arg) {
  if (raw.kind == Kind::kFloat && raw.bits == 32) return DType::kFloat32;
  if (raw.kind == Kind::kFloat && raw.bits == 64) return DType::kFloat64;
  if (raw.kind == Kind::kFloat && raw.bits == 16) return DType::kFloat16;
  if (raw.kind == Kind::kBFloat && raw.bits == 16) return DType::kBFloat16;
  throw InvalidArgument(ArgMessage(std::string(arg) + ".dtype", raw.type_text,
                                   "float32, float64, bfloat16 or float16"));
}

}  // namespace

HeldView ViewOf(py::handle obj, std::string_view arg, Access access, ScalarTensor scalar) {
  Raw raw = RawOf(obj, arg, access);
  const DType dtype = FloatDType(raw, arg);
  if (raw.shape.empty() && scalar == ScalarTensor::kAsShape1) {
    raw.shape = {1};
    raw.strides = {1};
  }
  const auto rank = static_cast<std::int64_t>(raw.shape.size());
  if (rank < 1 || rank > kMaxRank) {
    Require(false, std::string(arg) + ".ndim", rank,
            "a rank in [1, " + std::to_string(kMaxRank) + "]");
  }
  HeldView held;
  held.view.data = raw.data;
  held.view.dtype = dtype;
  held.view.rank = static_cast<int>(rank);
  for (std::size_t d = 0; d < raw.shape.size(); ++d) {
    held.view.shape[d] = raw.shape[d];
    held.view.strides[d] = raw.strides[d];
  }
  held.keep = std::move(raw.keep);
  return held;
}

IntArray IntsOf(py::handle obj, std::string_view arg) {
  Raw raw = RawOf(obj, arg, Access::kRead);
  const bool integer = (raw.kind == Kind::kInt || raw.kind == Kind::kUInt) &&
                       (raw.bits == 8 || raw.bits == 16 || raw.bits == 32 || raw.bits == 64);
  Require(integer, std::string(arg) + ".dtype", raw.type_text, "an integer dtype");
  IntArray out;
  out.shape = raw.shape;
  std::int64_t n = 1;
  for (std::int64_t s : raw.shape) n *= s;
  out.values.resize(static_cast<std::size_t>(n));
  const int rank = static_cast<int>(raw.shape.size());
  std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t offset = 0;
    for (int d = 0; d < rank; ++d) offset += index[d] * raw.strides[d];
    const char* p = static_cast<const char*>(raw.data) + offset * (raw.bits / 8);
    std::int64_t v = 0;
    if (raw.kind == Kind::kInt) {
      switch (raw.bits) {
        case 8:
          v = *reinterpret_cast<const std::int8_t*>(p);
          break;
        case 16:
          v = *reinterpret_cast<const std::int16_t*>(p);
          break;
        case 32:
          v = *reinterpret_cast<const std::int32_t*>(p);
          break;
        default:
          v = *reinterpret_cast<const std::int64_t*>(p);
          break;
      }
    } else {
      std::uint64_t u = 0;
      switch (raw.bits) {
        case 8:
          u = *reinterpret_cast<const std::uint8_t*>(p);
          break;
        case 16:
          u = *reinterpret_cast<const std::uint16_t*>(p);
          break;
        case 32:
          u = *reinterpret_cast<const std::uint32_t*>(p);
          break;
        default:
          u = *reinterpret_cast<const std::uint64_t*>(p);
          break;
      }
      Require(u <= static_cast<std::uint64_t>(INT64_MAX), std::string(arg), u,
              "values that fit in int64");
      v = static_cast<std::int64_t>(u);
    }
    out.values[static_cast<std::size_t>(i)] = v;
    for (int d = rank - 1; d >= 0; --d) {  // row-major increment
      if (++index[d] < raw.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

Positions PositionsOf(py::handle obj, std::int64_t offset, std::string_view arg,
                      IntArray& storage) {
  if (obj.is_none()) return Positions::Offset(offset);
  Require(offset == 0, "offset", offset, "0 when explicit positions are given");
  storage = IntsOf(obj, arg);
  const auto rank = static_cast<std::int64_t>(storage.shape.size());
  Require(rank == 1 || rank == 2, std::string(arg) + ".ndim", rank,
          "1 ([seq], shared by all batch rows) or 2 ([batch, seq])");
  Require(!storage.values.empty(), std::string(arg) + ".size", 0, "at least one position");
  return Positions::Ids(storage.values.data(), static_cast<std::int64_t>(storage.values.size()));
}

}  // namespace posenc::python
