#include "charge_outbox/util/batch_memory.hpp"

#include <malloc.h>

namespace charge_outbox::util {

void KeepBatchMemory() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

}  // namespace charge_outbox::util
