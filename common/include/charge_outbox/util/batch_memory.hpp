// KeepBatchMemory: tunes glibc's allocator for a process that handles large batches (the relay's claims,
// a consumer's polls), process-wide; call once at start, before its threads allocate.
#pragma once

namespace charge_outbox::util {

// Every batch allocates and frees megabytes: rows, libpq's results, librdkafka's messages. With glibc's
// defaults that memory went back to the kernel after each batch and was faulted in again by the next:
// malloc, free and page faults took two fifths of the relay's CPU in its drain benchmark, and a third of
// settlement-projection's. Keep it.
void KeepBatchMemory();

}  // namespace charge_outbox::util
