#include "models/torch_ckpt/pickle.h"

#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace vrun::torch_ckpt {

const char* py_kind_name(PyObj::Kind k) {
  switch (k) {
    case PyObj::Kind::kNone: return "None";
    case PyObj::Kind::kBool: return "bool";
    case PyObj::Kind::kInt: return "int";
    case PyObj::Kind::kFloat: return "float";
    case PyObj::Kind::kStr: return "str";
    case PyObj::Kind::kBytes: return "bytes";
    case PyObj::Kind::kList: return "list";
    case PyObj::Kind::kTuple: return "tuple";
    case PyObj::Kind::kDict: return "dict";
    case PyObj::Kind::kGlobal: return "global";
    case PyObj::Kind::kStorage: return "storage";
    case PyObj::Kind::kTensor: return "tensor";
  }
  return "?";
}

namespace {

const char* const kStorageTypes[] = {"FloatStorage", "HalfStorage",  "BFloat16Storage", "DoubleStorage",
                                     "LongStorage",  "IntStorage",   "ShortStorage",    "CharStorage",
                                     "ByteStorage",  "BoolStorage"};

bool allowed_global(const std::string& g) {
  if (g == "collections.OrderedDict" || g == "torch._utils._rebuild_tensor_v2" || g == "torch._utils._rebuild_parameter" ||
      g == "torch._utils._rebuild_parameter_with_state")
    return true;
  for (const char* s : kStorageTypes)
    if (g == std::string("torch.") + s) return true;
  return false;
}

PyRef make(PyObj::Kind k) {
  auto o = std::make_shared<PyObj>();
  o->kind = k;
  return o;
}

class Unpickler {
 public:
  Unpickler(std::span<const uint8_t> b, const std::string& source) : b_(b), source_(source) {}

  Result<PyRef> run() {
    while (true) {
      if (p_ >= b_.size()) return err(ErrorCode::kInvalidArgument, source_, ": pickle ends without a STOP opcode (truncated)");
      const size_t at = p_;
      const uint8_t op = b_[p_++];
      Status s = step(op);
      if (!s.is_ok()) return s.with_context(source_ + ": pickle opcode 0x" + hex(op) + " at byte " + std::to_string(at));
      if (stopped_) {
        if (stack_.size() != 1) return err(ErrorCode::kInvalidArgument, source_, ": pickle STOP with ", stack_.size(), " values on the stack");
        return stack_.back();
      }
    }
  }

 private:
  template <typename... A>
  Status fail(A&&... parts) {
    return err(ErrorCode::kInvalidArgument, parts...);
  }
  static std::string hex(uint8_t v) {
    const char* d = "0123456789abcdef";
    return {d[v >> 4], d[v & 15]};
  }
  bool need(size_t n) const { return n <= b_.size() - p_; }
  uint64_t le(int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | b_[p_ + static_cast<size_t>(i)];
    p_ += static_cast<size_t>(n);
    return v;
  }
  Result<std::string> raw(uint64_t n) {
    if (n > b_.size() - p_) return err(ErrorCode::kInvalidArgument, "a ", n, "-byte string runs past the end (truncated)");
    std::string s(reinterpret_cast<const char*>(b_.data() + p_), static_cast<size_t>(n));
    p_ += static_cast<size_t>(n);
    return s;
  }
  Result<std::string> line() {
    const void* nl = std::memchr(b_.data() + p_, '\n', b_.size() - p_);
    if (!nl) return err(ErrorCode::kInvalidArgument, "a text argument has no end of line (truncated)");
    const size_t end = static_cast<size_t>(static_cast<const uint8_t*>(nl) - b_.data());
    std::string s(reinterpret_cast<const char*>(b_.data() + p_), end - p_);
    p_ = end + 1;
    return s;
  }
  Result<PyRef> pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return err(ErrorCode::kInvalidArgument, "stack underflow");
    PyRef v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Result<std::vector<PyRef>> pop_mark() {
    if (marks_.empty()) return err(ErrorCode::kInvalidArgument, "no MARK on the stack");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  Result<PyRef> top() {
    if (stack_.empty()) return err(ErrorCode::kInvalidArgument, "stack underflow");
    return stack_.back();
  }
  void push(PyRef v) { stack_.push_back(std::move(v)); }
  PyRef integer(int64_t v) {
    PyRef o = make(PyObj::Kind::kInt);
    o->i = v;
    return o;
  }
  PyRef str(std::string s, PyObj::Kind k = PyObj::Kind::kStr) {
    PyRef o = make(k);
    o->s = std::move(s);
    return o;
  }
  Status global(const std::string& module, const std::string& name) {
    const std::string g = module + "." + name;
    if (!allowed_global(g))
      return err(ErrorCode::kUnsupported, "refuses global '", g,
                 "': only tensors, storages and plain containers are read from checkpoints");
    push(str(g, PyObj::Kind::kGlobal));
    return Status::ok();
  }
  Status memo_get(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) return err(ErrorCode::kInvalidArgument, "memo key ", k, " was never stored");
    push(it->second);
    return Status::ok();
  }
  // Inserting a value that reaches the container back would make a cycle: reference counting
  // never frees one, and every reader of the value would walk it forever. No checkpoint holds one.
  // The walks are bounded in total, so shared values inserted over and over cannot make the
  // checks quadratic.
  Status check_acyclic(const PyObj& container, const std::vector<PyRef>& values) {
    std::vector<const PyObj*> todo;
    for (const PyRef& v : values)
      if (!v->items.empty() || !v->dict.empty() || v.get() == &container) todo.push_back(v.get());
    if (todo.empty()) return Status::ok();
    std::unordered_set<const PyObj*> seen;
    while (!todo.empty()) {
      const PyObj* o = todo.back();
      todo.pop_back();
      if (o == &container) return fail("a ", py_kind_name(container.kind), " would contain itself (a cyclic value)");
      if (!seen.insert(o).second) continue;
      if (++walked_ > 64 * b_.size() + (1u << 20)) return fail("values are shared too densely to check for cycles");
      for (const PyRef& i : o->items) todo.push_back(i.get());
      for (const auto& [k, v] : o->dict) {
        todo.push_back(k.get());
        todo.push_back(v.get());
      }
    }
    return Status::ok();
  }

  Status memo_put(uint64_t k) {
    VRUN_ASSIGN_OR_RETURN(PyRef v, top());
    memo_[k] = v;
    return Status::ok();
  }
  static Status set_items(PyObj& d, const std::vector<PyRef>& kv) {
    if (d.kind != PyObj::Kind::kDict) return err(ErrorCode::kInvalidArgument, "SETITEM(S) on a ", py_kind_name(d.kind));
    if (kv.size() % 2) return err(ErrorCode::kInvalidArgument, "SETITEMS with an odd number of values");
    for (size_t i = 0; i < kv.size(); i += 2) d.dict.emplace_back(kv[i], kv[i + 1]);
    return Status::ok();
  }
  static Result<std::vector<int64_t>> int_tuple(const PyRef& t, const char* what) {
    if (t->kind != PyObj::Kind::kTuple && t->kind != PyObj::Kind::kList)
      return err(ErrorCode::kInvalidArgument, "tensor ", what, " is a ", py_kind_name(t->kind), ", not a tuple");
    std::vector<int64_t> v;
    for (const PyRef& x : t->items) {
      if (x->kind != PyObj::Kind::kInt) return err(ErrorCode::kInvalidArgument, "tensor ", what, " holds a ", py_kind_name(x->kind));
      v.push_back(x->i);
    }
    return v;
  }
  Result<PyRef> reduce(const PyRef& fn, const PyRef& args) {
    if (fn->kind != PyObj::Kind::kGlobal) return err(ErrorCode::kInvalidArgument, "REDUCE on a ", py_kind_name(fn->kind));
    if (args->kind != PyObj::Kind::kTuple) return err(ErrorCode::kInvalidArgument, "REDUCE arguments are a ", py_kind_name(args->kind));
    const auto& a = args->items;
    if (fn->s == "collections.OrderedDict") {
      PyRef d = make(PyObj::Kind::kDict);
      if (a.empty()) return d;
      if (a.size() == 1 && (a[0]->kind == PyObj::Kind::kList || a[0]->kind == PyObj::Kind::kTuple)) {
        for (const PyRef& kv : a[0]->items) {
          if (kv->kind != PyObj::Kind::kTuple || kv->items.size() != 2) return err(ErrorCode::kInvalidArgument, "OrderedDict item is not a pair");
          d->dict.emplace_back(kv->items[0], kv->items[1]);
        }
        return d;
      }
      return err(ErrorCode::kInvalidArgument, "OrderedDict called with ", a.size(), " unexpected arguments");
    }
    if (fn->s == "torch._utils._rebuild_tensor_v2") {
      if (a.size() < 4) return err(ErrorCode::kInvalidArgument, "_rebuild_tensor_v2 with ", a.size(), " arguments (at least 4)");
      if (a[0]->kind != PyObj::Kind::kStorage) return err(ErrorCode::kInvalidArgument, "_rebuild_tensor_v2 storage is a ", py_kind_name(a[0]->kind));
      if (a[1]->kind != PyObj::Kind::kInt) return err(ErrorCode::kInvalidArgument, "_rebuild_tensor_v2 offset is a ", py_kind_name(a[1]->kind));
      PyRef t = make(PyObj::Kind::kTensor);
      t->tensor.storage = a[0]->storage;
      t->tensor.offset = a[1]->i;
      VRUN_ASSIGN_OR_RETURN(t->tensor.size, int_tuple(a[2], "size"));
      VRUN_ASSIGN_OR_RETURN(t->tensor.stride, int_tuple(a[3], "stride"));
      if (t->tensor.size.size() != t->tensor.stride.size())
        return err(ErrorCode::kInvalidArgument, "tensor size has ", t->tensor.size.size(), " dims, stride ", t->tensor.stride.size());
      return t;
    }
    if (fn->s == "torch._utils._rebuild_parameter" || fn->s == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != PyObj::Kind::kTensor) return err(ErrorCode::kInvalidArgument, fn->s, " without a tensor");
      return a[0];
    }
    return err(ErrorCode::kUnsupported, "refuses to call '", fn->s, "'");
  }

  Status refused(uint8_t op) {
    return err(ErrorCode::kUnsupported, "opcode '", (op >= 32 && op < 127) ? std::string(1, static_cast<char>(op)) : "0x" + hex(op),
               "' is not one a tensor checkpoint uses; refused");
  }

  // One opcode: framing, the end and the stack's marks here; the others by what they make.
  Status step(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        if (!need(1)) return fail("truncated");
        ++p_;
        return Status::ok();
      case 0x95:  // FRAME
        if (!need(8)) return fail("truncated");
        p_ += 8;
        return Status::ok();
      case '.': stopped_ = true; return Status::ok();
      case '(': marks_.push_back(stack_.size()); return Status::ok();
      case '0': return pop().status();
      case '1': return pop_mark().status();
      case '2': {
        VRUN_ASSIGN_OR_RETURN(PyRef v, top());
        push(v);
        return Status::ok();
      }
      case 'N':
      case 0x88:
      case 0x89:
      case 'J':
      case 'K':
      case 'M':
      case 0x8a:
      case 0x8b:
      case 'I':
      case 'G':
        return push_scalar(op);
      case 'X':
      case 0x8c:
      case 0x8d:
      case 'T':
      case 'U':
      case 'B':
      case 'C':
        return push_string(op);
      case 'q':
      case 'r':
      case 0x94:
      case 'h':
      case 'j':
      case 'p':
      case 'g':
        return memo_op(op);
      case '}':
      case ']':
      case ')':
      case 't':
      case 'l':
      case 0x85:
      case 0x86:
      case 0x87:
      case 'd':
        return make_container(op);
      case 'a':
      case 'e':
      case 's':
      case 'u':
        return add_items(op);
      case 'c':
      case 0x93:
      case 'R':
      case 'b':
      case 'Q':
        return object_op(op);
      default:
        return refused(op);
    }
  }

  // None, booleans, integers and floats.
  Status push_scalar(uint8_t op) {
    using K = PyObj::Kind;
    switch (op) {
      case 'N': push(make(K::kNone)); return Status::ok();
      case 0x88:
      case 0x89: {
        PyRef o = make(K::kBool);
        o->b = op == 0x88;
        push(o);
        return Status::ok();
      }
      case 'J':
        if (!need(4)) return fail("truncated");
        push(integer(static_cast<int32_t>(le(4))));
        return Status::ok();
      case 'K':
        if (!need(1)) return fail("truncated");
        push(integer(static_cast<int64_t>(le(1))));
        return Status::ok();
      case 'M':
        if (!need(2)) return fail("truncated");
        push(integer(static_cast<int64_t>(le(2))));
        return Status::ok();
      case 0x8a:    // LONG1
      case 0x8b: {  // LONG4
        const int w = op == 0x8a ? 1 : 4;
        if (!need(static_cast<size_t>(w))) return fail("truncated");
        const uint64_t n = le(w);
        if (n > 8) return fail("an integer of ", n, " bytes does not fit 64 bits");
        if (!need(n)) return fail("truncated");
        uint64_t v = n ? le(static_cast<int>(n)) : 0;
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
        push(integer(static_cast<int64_t>(v)));
        return Status::ok();
      }
      case 'I': {
        VRUN_ASSIGN_OR_RETURN(std::string s, line());
        if (s == "00" || s == "01") {
          PyRef o = make(K::kBool);
          o->b = s == "01";
          push(o);
          return Status::ok();
        }
        char* end = nullptr;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end) return fail("INT argument '", s, "' is not a number");
        push(integer(v));
        return Status::ok();
      }
      case 'G': {
        if (!need(8)) return fail("truncated");
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | b_[p_++];  // big-endian
        PyRef o = make(K::kFloat);
        std::memcpy(&o->f, &bits, 8);
        push(o);
        return Status::ok();
      }
    }
    return refused(op);
  }

  // str and bytes (X, T, B: 4-byte length; U, C, SHORT_BINUNICODE: 1; BINUNICODE8: 8).
  Status push_string(uint8_t op) {
    const int w = (op == 0x8c || op == 'U' || op == 'C') ? 1 : (op == 0x8d ? 8 : 4);
    if (!need(static_cast<size_t>(w))) return fail("truncated");
    VRUN_ASSIGN_OR_RETURN(std::string s, raw(le(w)));
    push(str(std::move(s), (op == 'B' || op == 'C') ? PyObj::Kind::kBytes : PyObj::Kind::kStr));
    return Status::ok();
  }

  // The memo: values stored under a key (PUT) and pushed again (GET). The key is a 1- or 4-byte
  // argument (BINPUT / BINGET, LONG_BINPUT / LONG_BINGET), a line of text (PUT / GET) or the
  // memo's size (MEMOIZE).
  Status memo_op(uint8_t op) {
    uint64_t k = 0;
    switch (op) {
      case 'q':
      case 'h':
      case 'r':
      case 'j': {
        const int w = op == 'q' || op == 'h' ? 1 : 4;
        if (!need(static_cast<size_t>(w))) return fail("truncated");
        k = le(w);
        break;
      }
      case 0x94: k = memo_.size(); break;
      case 'p':
      case 'g': {
        VRUN_ASSIGN_OR_RETURN(std::string s, line());
        char* end = nullptr;
        k = std::strtoull(s.c_str(), &end, 10);
        if (s.empty() || *end) return fail("memo key '", s, "' is not a number");
        break;
      }
      default: return refused(op);
    }
    const bool put = op == 'q' || op == 'r' || op == 0x94 || op == 'p';
    return put ? memo_put(k) : memo_get(k);
  }

  // Containers: empty ones, and tuples, lists and dicts of the values above a MARK or the top 1 to 3.
  Status make_container(uint8_t op) {
    using K = PyObj::Kind;
    switch (op) {
      case '}': push(make(K::kDict)); return Status::ok();
      case ']': push(make(K::kList)); return Status::ok();
      case ')': push(make(K::kTuple)); return Status::ok();
      case 't':
      case 'l': {
        VRUN_ASSIGN_OR_RETURN(auto items, pop_mark());
        PyRef o = make(op == 't' ? K::kTuple : K::kList);
        o->items = std::move(items);
        push(o);
        return Status::ok();
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = static_cast<size_t>(op - 0x84);
        PyRef o = make(K::kTuple);
        o->items.resize(n);
        for (size_t i = n; i-- > 0;) {
          VRUN_ASSIGN_OR_RETURN(o->items[i], pop());
        }
        push(o);
        return Status::ok();
      }
      case 'd': {
        VRUN_ASSIGN_OR_RETURN(auto items, pop_mark());
        PyRef o = make(K::kDict);
        VRUN_RETURN_IF_ERROR(set_items(*o, items));
        push(o);
        return Status::ok();
      }
    }
    return refused(op);
  }

  // Items added to the list or dict below them (APPEND(S), SETITEM(S)).
  Status add_items(uint8_t op) {
    using K = PyObj::Kind;
    switch (op) {
      case 'a': {
        VRUN_ASSIGN_OR_RETURN(PyRef v, pop());
        VRUN_ASSIGN_OR_RETURN(PyRef l, top());
        if (l->kind != K::kList) return fail("APPEND to a ", py_kind_name(l->kind));
        VRUN_RETURN_IF_ERROR(check_acyclic(*l, {v}));
        l->items.push_back(v);
        return Status::ok();
      }
      case 'e': {
        VRUN_ASSIGN_OR_RETURN(auto items, pop_mark());
        VRUN_ASSIGN_OR_RETURN(PyRef l, top());
        if (l->kind != K::kList) return fail("APPENDS to a ", py_kind_name(l->kind));
        VRUN_RETURN_IF_ERROR(check_acyclic(*l, items));
        l->items.insert(l->items.end(), items.begin(), items.end());
        return Status::ok();
      }
      case 's': {
        VRUN_ASSIGN_OR_RETURN(PyRef v, pop());
        VRUN_ASSIGN_OR_RETURN(PyRef k, pop());
        VRUN_ASSIGN_OR_RETURN(PyRef d, top());
        VRUN_RETURN_IF_ERROR(check_acyclic(*d, {k, v}));
        return set_items(*d, {k, v});
      }
      case 'u': {
        VRUN_ASSIGN_OR_RETURN(auto items, pop_mark());
        VRUN_ASSIGN_OR_RETURN(PyRef d, top());
        VRUN_RETURN_IF_ERROR(check_acyclic(*d, items));
        return set_items(*d, items);
      }
    }
    return refused(op);
  }

  // Globals (allowed ones only), calls of them (REDUCE), BUILD and storages (BINPERSID).
  Status object_op(uint8_t op) {
    using K = PyObj::Kind;
    switch (op) {
      case 'c': {
        VRUN_ASSIGN_OR_RETURN(std::string module, line());
        VRUN_ASSIGN_OR_RETURN(std::string name, line());
        return global(module, name);
      }
      case 0x93: {  // STACK_GLOBAL
        VRUN_ASSIGN_OR_RETURN(PyRef name, pop());
        VRUN_ASSIGN_OR_RETURN(PyRef module, pop());
        if (name->kind != K::kStr || module->kind != K::kStr) return fail("STACK_GLOBAL of non-strings");
        return global(module->s, name->s);
      }
      case 'R': {
        VRUN_ASSIGN_OR_RETURN(PyRef args, pop());
        VRUN_ASSIGN_OR_RETURN(PyRef fn, pop());
        VRUN_ASSIGN_OR_RETURN(PyRef v, reduce(fn, args));
        push(v);
        return Status::ok();
      }
      case 'b': {  // BUILD: an OrderedDict's __dict__ (state_dict _metadata) or a tensor's state
        VRUN_ASSIGN_OR_RETURN(PyRef state, pop());
        VRUN_ASSIGN_OR_RETURN(PyRef obj, top());
        if (obj->kind != K::kDict && obj->kind != K::kTensor) return fail("BUILD on a ", py_kind_name(obj->kind));
        return Status::ok();
      }
      case 'Q': {  // BINPERSID
        VRUN_ASSIGN_OR_RETURN(PyRef pid, pop());
        const auto& it = pid->items;
        if (pid->kind != K::kTuple || it.size() < 5 || it[0]->kind != K::kStr || it[0]->s != "storage" ||
            it[1]->kind != K::kGlobal || it[2]->kind != K::kStr || it[4]->kind != K::kInt)
          return fail("persistent id is not ('storage', type, key, location, numel)");
        PyRef o = make(K::kStorage);
        o->storage.type = it[1]->s.substr(it[1]->s.rfind('.') + 1);
        o->storage.key = it[2]->s;
        o->storage.numel = it[4]->i;
        push(o);
        return Status::ok();
      }
    }
    return refused(op);
  }

  std::span<const uint8_t> b_;
  std::string source_;
  size_t p_ = 0;
  bool stopped_ = false;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyRef> memo_;
  uint64_t walked_ = 0;
};

}  // namespace

Result<PyRef> read_pickle(std::span<const uint8_t> bytes, const std::string& source) {
  Unpickler u(bytes, source);
  return u.run();
}

}  // namespace vrun::torch_ckpt
