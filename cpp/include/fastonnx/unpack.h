// Unpacking a generic Arg into the typed parameters of a converter. `what` names the schema
// argument for the error when the FX graph holds something of the wrong type.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fastonnx/args.h"
#include "fastonnx/builder.h"
#include "fastonnx/types.h"

namespace fastonnx {

// Argument `i` of a node, Missing past the arguments it has; whether it was given (neither past
// them nor Missing), so that the schema's default applies when it was not.
const Arg& arg_at(const Args& args, size_t i);
bool given(const Args& args, size_t i);

// Tensors. torch.export keeps Python numbers in Tensor slots (`x + 1` is add.Tensor(x, 1));
// they become 0-d constants of torch's default dtype for the kind of number.
Value unpack_tensor(Builder& b, const Arg& a, const char* what);
std::optional<Value> unpack_opt_tensor(Builder& b, const Arg& a, const char* what);
std::vector<Value> unpack_tensor_list(Builder& b, const Arg& a, const char* what);
std::vector<std::optional<Value>> unpack_opt_tensor_list(Builder& b, const Arg& a, const char* what);

int64_t unpack_int(const Arg& a, const char* what);
std::optional<int64_t> unpack_opt_int(const Arg& a, const char* what);
SymInt unpack_symint(const Arg& a, const char* what);
std::optional<SymInt> unpack_opt_symint(const Arg& a, const char* what);
double unpack_float(const Arg& a, const char* what);
std::optional<double> unpack_opt_float(const Arg& a, const char* what);
bool unpack_bool(const Arg& a, const char* what);
std::optional<bool> unpack_opt_bool(const Arg& a, const char* what);
std::string unpack_str(const Arg& a, const char* what);
std::optional<std::string> unpack_opt_str(const Arg& a, const char* what);
// A Scalar is a number, or a number the graph computes (a symbolic size, `.item()`).
Scalar unpack_scalar(Builder& b, const Arg& a, const char* what);
std::optional<Scalar> unpack_opt_scalar(Builder& b, const Arg& a, const char* what);
ScalarType unpack_scalar_type(const Arg& a, const char* what);
std::optional<ScalarType> unpack_opt_scalar_type(const Arg& a, const char* what);

// `size` > 0 is the N of `int[N]`: a single int (or one-item list) is repeated N times, as
// torch's argument parser does.
std::vector<int64_t> unpack_int_list(const Arg& a, const char* what, int size = 0);
std::optional<std::vector<int64_t>> unpack_opt_int_list(const Arg& a, const char* what, int size = 0);
SymIntList unpack_symint_list(const Arg& a, const char* what, int size = 0);
std::optional<SymIntList> unpack_opt_symint_list(const Arg& a, const char* what, int size = 0);
std::vector<double> unpack_float_list(const Arg& a, const char* what, int size = 0);
std::optional<std::vector<double>> unpack_opt_float_list(const Arg& a, const char* what, int size = 0);
std::vector<bool> unpack_bool_list(const Arg& a, const char* what, int size = 0);

}  // namespace fastonnx
