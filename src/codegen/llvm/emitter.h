// Internal to codegen/llvm: the TIR -> LLVM IR translator. One Emitter per PrimFunc; it owns the
// IRBuilder state of the function being emitted (the kernel, or a parallel loop body outlined
// into its own function) and the bindings of TIR vars and buffers to LLVM values.
// emit_expr.cc translates expressions, emit_stmt.cc statements (loops, outlining, allocation).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "tir/ir.h"

namespace kiln::codegen {

// Target attributes put on every generated function.
struct FunctionTarget {
  std::string cpu;
  std::string features;
  int vector_math_bits = 0;  // widest glibc libmvec variant usable (128/256/512), 0: none
};

class Emitter {
 public:
  Emitter(llvm::Module& module, const FunctionTarget& target, const tir::PrimFunc& func);
  // Emits the kernel `void name(ptr buffers, ptr scalars)` into the module.
  void emit_kernel();

  // ---- expressions (emit_expr.cc) ----
  llvm::Value* emit(const tir::Expr& e);
  llvm::Type* llvm_type(tir::DataType t);    // register type (bool -> i1)
  llvm::Type* memory_type(DType t);          // element type in memory (bool -> i8)

 private:
  llvm::Value* emit_binary(const tir::ExprNode& e);
  llvm::Value* divide_by_constant_exactly(llvm::Value* a, llvm::Value* b);
  llvm::Value* emit_compare(const tir::ExprNode& e);
  llvm::Value* emit_cast(tir::DataType to, const tir::Expr& value);
  llvm::Value* emit_call(const tir::ExprNode& e);
  llvm::Value* emit_load(const tir::ExprNode& e);
  llvm::Value* call_libm(const std::string& name, llvm::Value* x, llvm::Value* y);
  llvm::Value* call_libmvec(const std::string& name, const std::vector<llvm::Value*>& args);
  // exp of a float32 vector as inline code (no call), or null for other types.
  llvm::Value* inline_exp(llvm::Value* x);
  llvm::Value* inline_erf(llvm::Value* x);
  llvm::Value* flat_index(const tir::Buffer& b, const std::vector<tir::Expr>& indices);
  llvm::Value* buffer_ptr(const tir::Buffer& b);
  // Whether a vector access's last index is Ramp(base, stride) with a constant stride (set in
  // *stride) and its other indices are scalars; no IR is emitted.
  static bool ramp_stride(const std::vector<tir::Expr>& indices, int64_t* stride);
  // The address of lane 0 of such an access.
  llvm::Value* lane0_address(const tir::Buffer& b, const std::vector<tir::Expr>& indices);
  // lane0_address for Ramp(base, 1) accesses, else null (nothing emitted).
  llvm::Value* contiguous_address(const tir::Buffer& b, const std::vector<tir::Expr>& indices);
  llvm::Value* element_address(const tir::Buffer& b, const std::vector<tir::Expr>& indices);
  llvm::Value* to_lanes(llvm::Value* v, int lanes);
  llvm::Value* as_i64(llvm::Value* v, bool is_signed);
  [[noreturn]] void fail(const std::string& what) const;

  // ---- statements (emit_stmt.cc) ----
  void emit(const tir::Stmt& s);
  void emit_for(const tir::StmtNode& s);
  void emit_loop(const tir::StmtNode& s, llvm::Value* begin, llvm::Value* end);
  void emit_parallel_for(const tir::StmtNode& s);
  void emit_store(const tir::StmtNode& s);
  // A whole-cache-line vector store into a large kernel parameter at an address provably
  // 64-byte aligned: written with a non-temporal (streaming) store.
  bool streaming_store(const tir::Buffer& buf, const std::vector<tir::Expr>& indices, int lanes) const;
  void emit_store_fence();
  void emit_allocate(const tir::StmtNode& s);
  void emit_if(const tir::StmtNode& s);
  void emit_extern_call(const tir::ExprNode& call);
  llvm::Function* new_function(const std::string& name, llvm::FunctionType* type);
  llvm::AllocaInst* entry_alloca(llvm::Type* type, llvm::Value* count, const std::string& name);

  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  FunctionTarget target_;
  const tir::PrimFunc& func_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;       // function being emitted
  llvm::BasicBlock* entry_ = nullptr;  // its entry block (allocas)
  int outlined_ = 0;                   // counter for outlined parallel bodies
  bool streamed_ = false;              // the function being emitted has non-temporal stores
  std::unordered_map<const tir::ExprNode*, llvm::Value*> vars_;
  std::unordered_map<const tir::BufferNode*, llvm::Value*> buffers_;
};

}  // namespace kiln::codegen
