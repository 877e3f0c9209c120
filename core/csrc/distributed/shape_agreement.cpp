#include "distributed/shape_agreement.h"

#include <sstream>
#include <string>

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

namespace torchplug::distributed {
namespace {

constexpr int64_t kMaxDims = 8;
// Operation, tensor count, total elements, then the first tensor's dtype,
// number of dimensions and sizes (dimensions past kMaxDims are folded into
// the total). Enough to tell every mismatch Gloo would abort on.
constexpr int64_t kFields = 5 + kMaxDims;

at::Tensor describe(c10d::OpType op_type, const std::vector<at::Tensor>& tensors) {
  at::Tensor description = at::zeros({kFields}, at::kLong);
  auto* field = description.data_ptr<int64_t>();
  field[0] = static_cast<int64_t>(op_type);
  field[1] = static_cast<int64_t>(tensors.size());
  for (const at::Tensor& tensor : tensors) {
    field[2] += tensor.numel();
  }
  if (!tensors.empty()) {
    const at::Tensor& first = tensors.front();
    field[3] = static_cast<int64_t>(first.scalar_type());
    field[4] = first.dim();
    for (int64_t dim = 0; dim < std::min<int64_t>(first.dim(), kMaxDims); ++dim) {
      field[5 + dim] = first.size(dim);
    }
  }
  return description;
}

std::string render(const int64_t* field) {
  std::ostringstream text;
  text << c10::toString(static_cast<c10::ScalarType>(field[3])) << "[";
  for (int64_t dim = 0; dim < std::min<int64_t>(field[4], kMaxDims); ++dim) {
    text << (dim > 0 ? ", " : "") << field[5 + dim];
  }
  text << (field[4] > kMaxDims ? ", ...]" : "]");
  if (field[1] != 1) {
    text << " and " << field[1] - 1 << " more tensors (" << field[2] << " elements in all)";
  }
  return text.str();
}

}  // namespace

ShapeAgreement::ShapeAgreement(c10::intrusive_ptr<c10d::Backend> checks) : checks_(std::move(checks)) {
  TORCH_CHECK(checks_, "The torchplug collective backend needs a Gloo group for its shape checks.");
}

void ShapeAgreement::require(const char* collective, c10d::OpType op_type,
                             const std::vector<at::Tensor>& tensors) const {
  std::vector<at::Tensor> mine{describe(op_type, tensors)};
  std::vector<std::vector<at::Tensor>> everyone(1);
  for (int rank = 0; rank < checks_->getSize(); ++rank) {
    everyone[0].push_back(at::empty({kFields}, at::kLong));
  }
  checks_->allgather(everyone, mine)->wait();
  const auto* own = mine[0].data_ptr<int64_t>();
  bool agree = true;
  for (const at::Tensor& theirs : everyone[0]) {
    agree = agree && std::equal(own, own + kFields, theirs.data_ptr<int64_t>());
  }
  if (agree) {
    return;
  }
  std::ostringstream ranks;
  for (size_t rank = 0; rank < everyone[0].size(); ++rank) {
    const auto* field = everyone[0][rank].data_ptr<int64_t>();
    ranks << "\n  rank " << rank << ": " << c10d::opTypeToString(static_cast<c10d::OpType>(field[0])) << " of "
          << render(field);
  }
  TORCH_CHECK(false, collective, " needs tensors of the same dtype and shape on every rank, but the ranks passed:",
              ranks.str(), "\nPass the same dtype and shape on every rank (this rank is ", checks_->getRank(),
              "; the process group is still usable).");
}

}  // namespace torchplug::distributed
