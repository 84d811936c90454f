#include "join_waves.hpp"

#include <algorithm>

namespace banyan::cli {

std::vector<std::vector<planned_join>> plan_join_waves(std::size_t procs,
                                                       const join_wave_limits& lim) {
  std::vector<std::vector<planned_join>> waves;
  std::vector<std::size_t> ready{0};
  const std::size_t per_contact = std::max<std::size_t>(1, lim.per_contact);
  const std::size_t per_owner = std::max<std::size_t>(1, lim.per_owner);
  const std::size_t each = std::max<std::size_t>(1, lim.contacts_each);
  for (std::size_t next = 1; next < procs;) {
    const std::size_t size = std::min({procs - next, per_contact * ready.size(), per_owner});
    std::vector<planned_join> wave;
    for (std::size_t j = 0; j < size; ++j, ++next) {
      planned_join p;
      p.proc = next;
      for (std::size_t c = 0; c < std::min(each, ready.size()); ++c)
        p.contacts.push_back(ready[(j + c) % ready.size()]);
      wave.push_back(std::move(p));
    }
    for (auto& p : wave)
      ready.push_back(p.proc);
    waves.push_back(std::move(wave));
  }
  return waves;
}

} // namespace banyan::cli
