#pragma once
// Where an array's memory lives. Only the CPU exists in this layer; the CUDA backend adds cuda(i).
#include <ostream>
#include <string>

namespace zenith {

struct device {
  enum class kind { cpu, cuda };
  kind type = kind::cpu;
  int index = 0;
  friend bool operator==(device const&, device const&) = default;
  std::string str() const {
    return type == kind::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
  }
  friend std::ostream& operator<<(std::ostream& os, device const& d) { return os << d.str(); }
};

inline constexpr device cpu{device::kind::cpu, 0};

}  // namespace zenith
