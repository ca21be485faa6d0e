// TIR statements -> LLVM control flow. Loops are emitted as header/body/latch with the loop
// kind as llvm.loop metadata (unroll, vectorize); a parallel loop's body is outlined into
// `<kernel>_par<N>(i64 begin, i64 end, ptr closure)` whose closure struct carries every value
// the body uses (buffer pointers, scalars, let-bound vars), launched by kiln_parallel_for.
// Local allocations with constant size live in the entry block's stack frame; global ones use
// aligned_alloc/free from the process.
#include <algorithm>
#include <functional>
#include <unordered_set>

#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/llvm/emitter.h"
#include "core/error.h"

namespace kiln::codegen {

using tir::Expr;
using tir::ExprKind;
using tir::ExprNode;
using tir::ForKind;
using tir::Stmt;
using tir::StmtKind;
using tir::StmtNode;

Emitter::Emitter(llvm::Module& module, const FunctionTarget& target, const tir::PrimFunc& func)
    : module_(module), ctx_(module.getContext()), target_(target), func_(func), b_(ctx_) {}

llvm::Function* Emitter::new_function(const std::string& name, llvm::FunctionType* type) {
  auto linkage = name == func_.name ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage;
  if (module_.getFunction(name)) fail("a function named '" + name + "' is already in the module");
  llvm::Function* f = llvm::Function::Create(type, linkage, name, module_);
  f->addFnAttr("target-cpu", target_.cpu);
  if (!target_.features.empty()) f->addFnAttr("target-features", target_.features);
  f->setDoesNotThrow();
  // 512-bit vectors (TIR's 16 x f32, libmvec's AVX-512 variants) stay whole zmm values on CPUs
  // that prefer 256-bit vectors; the loop vectorizer's width still follows the CPU's preference.
  f->addFnAttr("min-legal-vector-width", "512");
  return f;
}

llvm::AllocaInst* Emitter::entry_alloca(llvm::Type* type, llvm::Value* count, const std::string& name) {
  llvm::IRBuilder<> at(entry_, entry_->begin());
  llvm::AllocaInst* a = at.CreateAlloca(type, count, name);
  a->setAlignment(llvm::Align(64));
  return a;
}

void Emitter::emit_kernel() {
  llvm::Type* ptr = b_.getPtrTy();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr}, false);
  fn_ = new_function(func_.name, type);
  llvm::Argument* bufs = fn_->getArg(0);
  llvm::Argument* scalars = fn_->getArg(1);
  bufs->setName("buffers");
  scalars->setName("scalars");
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry_);
  for (size_t i = 0; i < func_.buffer_params.size(); ++i) {
    const tir::Buffer& buf = func_.buffer_params[i];
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr, bufs, i);
    buffers_[buf.get()] = b_.CreateLoad(ptr, slot, buf->name);
  }
  for (size_t i = 0; i < func_.scalar_params.size(); ++i) {
    const Expr& var = func_.scalar_params[i];
    if (var->kind != ExprKind::kVar || var->type.lanes != 1 || !var->type.is_int())
      fail("scalar parameter " + std::to_string(i) + " is not an integer variable");
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), scalars, i);
    llvm::Value* v = b_.CreateLoad(b_.getInt64Ty(), slot, var->name);
    vars_[var.get()] = b_.CreateIntCast(v, llvm_type(var->type), true);
  }
  if (func_.body) emit(func_.body);
  emit_store_fence();
  b_.CreateRetVoid();

  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyFunction(*fn_, &os))
    throw_internal(__FILE__, __LINE__, "codegen/llvm: invalid IR for kernel '" + func_.name + "': " + os.str());
}

void Emitter::emit(const Stmt& s) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::kFor:
      if (s->for_kind == ForKind::kParallel) emit_parallel_for(*s); else emit_for(*s);
      return;
    case StmtKind::kLetStmt: {
      const ExprNode* var = s->var.get();
      llvm::Value* value = emit(s->value);
      auto it = vars_.find(var);
      llvm::Value* old = it == vars_.end() ? nullptr : it->second;
      vars_[var] = value;
      emit(s->body);
      if (old) vars_[var] = old; else vars_.erase(var);
      return;
    }
    case StmtKind::kStore: emit_store(*s); return;
    case StmtKind::kAllocate: emit_allocate(*s); return;
    case StmtKind::kIfThenElse: emit_if(*s); return;
    case StmtKind::kSeq:
      for (const Stmt& x : s->seq) emit(x);
      return;
    case StmtKind::kEvaluate:
      if (s->value->kind == ExprKind::kCall) emit_extern_call(*s->value); else emit(s->value);
      return;
  }
  fail("unknown statement kind");
}

namespace {

// Loop metadata for the loop kind; null when the loop needs none.
llvm::MDNode* loop_metadata(llvm::LLVMContext& ctx, ForKind kind, const Expr& extent) {
  llvm::Metadata* hint = nullptr;
  if (kind == ForKind::kUnrolled) {
    const bool constant = tir::is_const_int(extent);
    hint = llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, constant ? "llvm.loop.unroll.full"
                                                                      : "llvm.loop.unroll.enable")});
  } else if (kind == ForKind::kVectorized) {
    hint = llvm::MDNode::get(
        ctx, {llvm::MDString::get(ctx, "llvm.loop.vectorize.enable"),
              llvm::ConstantAsMetadata::get(llvm::ConstantInt::getTrue(ctx))});
  }
  if (!hint) return nullptr;
  llvm::MDNode* id = llvm::MDNode::getDistinct(ctx, {nullptr, hint});
  id->replaceOperandWith(0, id);
  return id;
}

}  // namespace

void Emitter::emit_for(const StmtNode& s) {
  llvm::Value* begin = emit(s.min);
  llvm::Value* end = b_.CreateAdd(begin, emit(s.extent));
  emit_loop(s, begin, end);
}

void Emitter::emit_loop(const StmtNode& s, llvm::Value* begin, llvm::Value* end) {
  if (s.var->kind != ExprKind::kVar || s.var->type.lanes != 1 || !s.var->type.is_int())
    fail("loop variable is not a scalar integer variable");
  llvm::Type* t = llvm_type(s.var->type);
  begin = b_.CreateIntCast(begin, t, true);
  end = b_.CreateIntCast(end, t, true);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx_, "for." + s.var->name, fn_);
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "for." + s.var->name + ".body", fn_);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "for." + s.var->name + ".end", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(t, 2, s.var->name);
  i->addIncoming(begin, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, end), body, exit);

  b_.SetInsertPoint(body);
  const ExprNode* var = s.var.get();
  auto it = vars_.find(var);
  llvm::Value* old = it == vars_.end() ? nullptr : it->second;
  vars_[var] = i;
  emit(s.body);
  if (old) vars_[var] = old; else vars_.erase(var);
  llvm::Value* next = b_.CreateAdd(i, llvm::ConstantInt::get(t, 1), "", /*HasNUW=*/false, /*HasNSW=*/true);
  llvm::BranchInst* back = b_.CreateBr(header);
  i->addIncoming(next, b_.GetInsertBlock());
  if (llvm::MDNode* md = loop_metadata(ctx_, s.for_kind, s.extent))
    back->setMetadata(llvm::LLVMContext::MD_loop, md);
  b_.SetInsertPoint(exit);
}

void Emitter::emit_parallel_for(const StmtNode& s) {
  // S1: the values the body reads from outside: bound vars and known buffers, in first-use order.
  std::vector<const ExprNode*> vars;
  std::vector<const tir::BufferNode*> bufs;
  std::unordered_set<const void*> seen;
  std::function<void(const Expr&)> visit_expr;
  auto visit_buffer = [&](const tir::Buffer& b) {
    if (!b || !buffers_.count(b.get()) || !seen.insert(b.get()).second) return;
    bufs.push_back(b.get());
    for (const Expr& d : b->shape) visit_expr(d);  // multi-dim indexing reads the shape
  };
  visit_expr = [&](const Expr& e) {
    if (!e) return;
    if (e->kind == ExprKind::kVar && e.get() != s.var.get() && vars_.count(e.get()) &&
        seen.insert(e.get()).second)
      vars.push_back(e.get());
    if (e->kind == ExprKind::kLoad) visit_buffer(e->buffer);
    for (const Expr& o : e->operands) visit_expr(o);
  };
  std::function<void(const Stmt&)> visit_stmt = [&](const Stmt& x) {
    if (!x) return;
    for (const Expr* e : {&x->var, &x->min, &x->extent, &x->value, &x->cond}) visit_expr(*e);
    for (const Expr& e : x->indices) visit_expr(e);
    visit_buffer(x->buffer);
    visit_stmt(x->body);
    visit_stmt(x->then_case);
    visit_stmt(x->else_case);
    for (const Stmt& y : x->seq) visit_stmt(y);
  };
  visit_stmt(s.body);

  // S2: the closure struct {min, vars..., buffers...}, filled in the caller's frame.
  llvm::Value* min = as_i64(emit(s.min), true);
  llvm::Value* n = as_i64(emit(s.extent), true);
  std::vector<llvm::Type*> fields{b_.getInt64Ty()};
  std::vector<llvm::Value*> values{min};
  for (const ExprNode* v : vars) values.push_back(vars_.at(v));
  for (const tir::BufferNode* buf : bufs) values.push_back(buffers_.at(buf));
  for (size_t k = 1; k < values.size(); ++k) fields.push_back(values[k]->getType());
  llvm::StructType* closure_type = llvm::StructType::get(ctx_, fields);
  llvm::AllocaInst* closure = entry_alloca(closure_type, nullptr, "closure");
  for (size_t k = 0; k < values.size(); ++k)
    b_.CreateStore(values[k], b_.CreateStructGEP(closure_type, closure, k));

  // S3: the outlined body `void name(i64 begin, i64 end, ptr closure)`.
  llvm::Type* i64 = b_.getInt64Ty();
  auto* body_type = llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, b_.getPtrTy()}, false);
  std::string body_name = func_.name + "_par" + std::to_string(outlined_++);
  llvm::Function* body = new_function(body_name, body_type);
  auto saved_ip = b_.saveIP();
  llvm::Function* saved_fn = fn_;
  llvm::BasicBlock* saved_entry = entry_;
  auto saved_vars = std::move(vars_);
  auto saved_buffers = std::move(buffers_);
  vars_.clear();
  buffers_.clear();
  fn_ = body;
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", body);
  b_.SetInsertPoint(entry_);
  llvm::Value* env = body->getArg(2);
  llvm::Value* inner_min = nullptr;
  for (size_t k = 0; k < values.size(); ++k) {
    llvm::Value* v = b_.CreateLoad(fields[k], b_.CreateStructGEP(closure_type, env, k));
    if (k == 0) inner_min = v;
    else if (k <= vars.size()) vars_[vars[k - 1]] = v;
    else buffers_[bufs[k - 1 - vars.size()]] = v;
  }
  const bool saved_streamed = streamed_;
  streamed_ = false;
  emit_loop(s, b_.CreateAdd(inner_min, body->getArg(0)), b_.CreateAdd(inner_min, body->getArg(1)));
  emit_store_fence();
  streamed_ = saved_streamed;
  b_.CreateRetVoid();
  fn_ = saved_fn;
  entry_ = saved_entry;
  vars_ = std::move(saved_vars);
  buffers_ = std::move(saved_buffers);
  b_.restoreIP(saved_ip);

  // S4: kiln_parallel_for(n, body, &closure).
  llvm::FunctionCallee launch = module_.getOrInsertFunction(
      "kiln_parallel_for",
      llvm::FunctionType::get(b_.getVoidTy(), {i64, b_.getPtrTy(), b_.getPtrTy()}, false));
  b_.CreateCall(launch, {n, body, closure});
}

namespace {

// Streaming stores pay off for outputs far larger than the per-core caches: they skip the
// read-for-ownership of each destination line and leave the caches to the inputs.
constexpr int64_t kStreamingBytes = int64_t{16} << 20;
constexpr int64_t kStreamAlign = 64;

// Whether integer expression e is a multiple of m for every value of its variables.
bool provably_multiple(const Expr& e, int64_t m) {
  int64_t c = 0;
  if (tir::is_const_int(e, &c)) return c % m == 0;
  switch (e->kind) {
    case ExprKind::kMul:
      return provably_multiple(e->operands[0], m) || provably_multiple(e->operands[1], m);
    case ExprKind::kAdd:
    case ExprKind::kSub:
      return provably_multiple(e->operands[0], m) && provably_multiple(e->operands[1], m);
    default:
      return false;
  }
}

}  // namespace

// Kernel ABI (codegen.h): buffer parameters are 64-byte aligned, so an index that is a multiple
// of the 64-byte lane count addresses a whole cache line.
bool Emitter::streaming_store(const tir::Buffer& buf, const std::vector<Expr>& indices, int lanes) const {
  const int64_t elem_bytes = static_cast<int64_t>(dtype_size(buf->dtype));
  if (buf->dtype == DType::kBool || indices.size() != 1 || lanes * elem_bytes != kStreamAlign) return false;
  if (std::find(func_.buffer_params.begin(), func_.buffer_params.end(), buf) == func_.buffer_params.end())
    return false;
  int64_t bytes = elem_bytes;
  for (const Expr& d : buf->shape) {
    int64_t n = 0;
    if (!tir::is_const_int(d, &n)) return false;
    bytes *= n;
  }
  return bytes >= kStreamingBytes && provably_multiple(indices[0]->operands[0], lanes);
}

// Non-temporal stores are weakly ordered: fence them before the function returns (and so before
// a parallel body reports its chunk done).
void Emitter::emit_store_fence() {
  if (!streamed_) return;
  b_.CreateCall(llvm::Intrinsic::getDeclaration(&module_, llvm::Intrinsic::x86_sse_sfence));
}

void Emitter::emit_store(const StmtNode& s) {
  const tir::Buffer& buf = s.buffer;
  llvm::Type* elem = memory_type(buf->dtype);
  const llvm::Align align(elem->getPrimitiveSizeInBits() / 8);
  int lanes = s.value->type.lanes;
  for (const Expr& i : s.indices) lanes = std::max(lanes, i->type.lanes);
  llvm::Value* v = to_lanes(emit(s.value), lanes);
  // acc[0] = acc[0] + x into a local accumulator (tir localize_accumulators): kiln's float
  // reductions may be reassociated, which lets LLVM keep several vector partial sums.
  if (buf->scope == "local" && (s.value->kind == ExprKind::kAdd || s.value->kind == ExprKind::kMul))
    if (auto* inst = llvm::dyn_cast<llvm::Instruction>(v); inst && llvm::isa<llvm::FPMathOperator>(inst))
      for (const Expr& operand : s.value->operands)
        if (operand->kind == ExprKind::kLoad && operand->buffer == buf) inst->setHasAllowReassoc(true);
  if (buf->dtype == DType::kBool) v = b_.CreateZExt(v, lanes > 1 ? llvm::FixedVectorType::get(elem, lanes) : elem);
  if (llvm::Value* ptr = lanes > 1 ? contiguous_address(buf, s.indices) : nullptr) {
    if (streaming_store(buf, s.indices, lanes)) {
      llvm::StoreInst* st = b_.CreateAlignedStore(v, ptr, llvm::Align(kStreamAlign));
      st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                      llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b_.getInt32(1))));
      streamed_ = true;
      return;
    }
    b_.CreateAlignedStore(v, ptr, align);
    return;
  }
  llvm::Value* idx = to_lanes(flat_index(buf, s.indices), lanes);
  llvm::Value* ptr = b_.CreateGEP(elem, buffer_ptr(buf), idx);
  if (lanes > 1) b_.CreateMaskedScatter(v, ptr, align);
  else b_.CreateAlignedStore(v, ptr, align);
}

void Emitter::emit_allocate(const StmtNode& s) {
  const tir::Buffer& buf = s.buffer;
  llvm::Type* elem = memory_type(buf->dtype);
  int64_t count = 1;
  bool constant = true;
  for (const Expr& d : buf->shape) {
    int64_t v = 0;
    if (tir::is_const_int(d, &v)) count *= v; else constant = false;
  }
  llvm::Value* ptr = nullptr;
  llvm::Value* heap = nullptr;
  if (buf->scope == "local") {
    if (!constant)
      fail("local buffer '" + buf->name + "' has a dynamic size; give it a constant bound or scope global");
    ptr = entry_alloca(elem, b_.getInt64(std::max<int64_t>(count, 1)), buf->name);
  } else {
    llvm::Value* n = b_.getInt64(1);
    for (const Expr& d : buf->shape) n = b_.CreateMul(n, as_i64(emit(d), true));
    llvm::Value* bytes = b_.CreateMul(n, b_.getInt64(elem->getPrimitiveSizeInBits() / 8));
    bytes = b_.CreateAnd(b_.CreateAdd(bytes, b_.getInt64(64)), b_.getInt64(~int64_t{63}));
    llvm::FunctionCallee alloc = module_.getOrInsertFunction(
        "aligned_alloc", llvm::FunctionType::get(b_.getPtrTy(), {b_.getInt64Ty(), b_.getInt64Ty()}, false));
    heap = ptr = b_.CreateCall(alloc, {b_.getInt64(64), bytes}, buf->name);
  }
  auto it = buffers_.find(buf.get());
  llvm::Value* old = it == buffers_.end() ? nullptr : it->second;
  buffers_[buf.get()] = ptr;
  emit(s.body);
  if (old) buffers_[buf.get()] = old; else buffers_.erase(buf.get());
  if (heap) {
    llvm::FunctionCallee release = module_.getOrInsertFunction(
        "free", llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy()}, false));
    b_.CreateCall(release, {heap});
  }
}

void Emitter::emit_if(const StmtNode& s) {
  llvm::Value* c = emit(s.cond);
  if (!c->getType()->isIntegerTy(1)) c = b_.CreateICmpNE(c, llvm::Constant::getNullValue(c->getType()));
  llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
  llvm::BasicBlock* else_bb = s.else_case ? llvm::BasicBlock::Create(ctx_, "if.else", fn_) : nullptr;
  llvm::BasicBlock* end = llvm::BasicBlock::Create(ctx_, "if.end", fn_);
  b_.CreateCondBr(c, then_bb, else_bb ? else_bb : end);
  b_.SetInsertPoint(then_bb);
  emit(s.then_case);
  b_.CreateBr(end);
  if (else_bb) {
    b_.SetInsertPoint(else_bb);
    emit(s.else_case);
    b_.CreateBr(end);
  }
  b_.SetInsertPoint(end);
}

void Emitter::emit_extern_call(const ExprNode& call) {
  std::vector<llvm::Value*> args;
  std::vector<llvm::Type*> types;
  for (const Expr& a : call.operands) {
    llvm::Value* v = nullptr;
    if (a->kind == ExprKind::kLoad) {
      v = element_address(a->buffer, a->operands);
    } else if (a->type.lanes != 1) {
      fail("call to '" + call.name + "': vector argument " + tir::to_string(a->type));
    } else if (a->type.is_float()) {
      v = emit(a);
    } else {
      v = as_i64(emit(a), is_signed(a->type.dtype) && !a->type.is_bool());
    }
    args.push_back(v);
    types.push_back(v->getType());
  }
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), types, false);
  if (llvm::Function* f = module_.getFunction(call.name); f && f->getFunctionType() != type)
    fail("external function '" + call.name + "' is called with different argument types");
  b_.CreateCall(module_.getOrInsertFunction(call.name, type), args);
}

}  // namespace kiln::codegen
