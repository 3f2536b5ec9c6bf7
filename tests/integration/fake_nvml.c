/* A fake NVML for the tests: the worker loads it instead of libnvidia-ml.so.1 when
 * AG_NVML_LIBRARY names it, so GPU detection, usage and health run without a GPU.
 * What it reports comes from the text file FAKE_NVML_STATE names, read again on every
 * call, one setting a line:
 *   gpus N                  N GPUs (default 0), named "Fake GPU", 16 GiB each
 *   util I P                GPU I is P% busy
 *   xid I X                 a critical XID X event of GPU I (each line is delivered once)
 *   ecc I N                 GPU I has N uncorrected (volatile) ECC errors
 *   retired_pending I       GPU I has pages waiting to be retired
 *   remap_pending I         GPU I has a row remap pending
 *   remap_failed I          a row remap of GPU I failed
 *   lost I                  GPU I is lost: calls about it answer GPU_IS_LOST
 *   hidden I                GPU I is gone from the device list (indices after it move up)
 * Built by the tests: cc -shared -fPIC -o libfake_nvml.so fake_nvml.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 16
#define SUCCESS 0
#define INVALID_ARGUMENT 2
#define NOT_SUPPORTED 3
#define TIMEOUT 10
#define GPU_IS_LOST 15

typedef struct {
  void* device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
} event_data_t;

typedef struct {
  int gpus;
  int util[MAX_GPUS];
  unsigned long long ecc[MAX_GPUS];
  int retired[MAX_GPUS], remap_pending[MAX_GPUS], remap_failed[MAX_GPUS], lost[MAX_GPUS], hidden[MAX_GPUS];
  int xid_gpu[256];
  unsigned long long xid[256];
  int xids;
} state_t;

/* One handle per physical GPU: its index is the handle's offset in this table. */
static char devices[MAX_GPUS];
static int xids_delivered;

static state_t read_state(void) {
  state_t s;
  memset(&s, 0, sizeof s);
  const char* path = getenv("FAKE_NVML_STATE");
  FILE* f = path ? fopen(path, "r") : NULL;
  if (!f) return s;
  char key[64];
  int i;
  unsigned long long v;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    int n = sscanf(line, "%63s %d %llu", key, &i, &v);
    if (n < 2 || i < 0) continue;
    if (!strcmp(key, "gpus")) s.gpus = i > MAX_GPUS ? MAX_GPUS : i;
    if (i >= MAX_GPUS) continue;
    if (!strcmp(key, "util") && n == 3) s.util[i] = (int)v;
    if (!strcmp(key, "ecc") && n == 3) s.ecc[i] = v;
    if (!strcmp(key, "retired_pending")) s.retired[i] = 1;
    if (!strcmp(key, "remap_pending")) s.remap_pending[i] = 1;
    if (!strcmp(key, "remap_failed")) s.remap_failed[i] = 1;
    if (!strcmp(key, "lost")) s.lost[i] = 1;
    if (!strcmp(key, "hidden")) s.hidden[i] = 1;
    if (!strcmp(key, "xid") && n == 3 && s.xids < 256) {
      s.xid_gpu[s.xids] = i;
      s.xid[s.xids++] = v;
    }
  }
  fclose(f);
  return s;
}

static int index_of(void* device) {
  if ((char*)device < devices || (char*)device >= devices + MAX_GPUS) return -1;
  return (int)((char*)device - devices);
}

int nvmlInit_v2(void) { return SUCCESS; }

int nvmlDeviceGetCount_v2(unsigned int* count) {
  state_t s = read_state();
  int n = 0;
  for (int i = 0; i < s.gpus; ++i) n += !s.hidden[i];
  *count = (unsigned int)n;
  return SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  state_t s = read_state();
  unsigned int seen = 0;
  for (int i = 0; i < s.gpus; ++i) {
    if (s.hidden[i]) continue;
    if (seen++ == index) {
      *device = &devices[i];
      return SUCCESS;
    }
  }
  return INVALID_ARGUMENT;
}

int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  if (index_of(device) < 0) return INVALID_ARGUMENT;
  snprintf(name, length, "Fake GPU");
  return SUCCESS;
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  int i = index_of(device);
  if (i < 0) return INVALID_ARGUMENT;
  if (read_state().lost[i]) return GPU_IS_LOST;
  snprintf(uuid, length, "GPU-fa4e0000-0000-0000-0000-%012d", i);
  return SUCCESS;
}

typedef struct {
  unsigned long long total, free, used;
} memory_t;

int nvmlDeviceGetMemoryInfo(void* device, memory_t* memory) {
  int i = index_of(device);
  if (i < 0) return INVALID_ARGUMENT;
  memory->total = 16ULL << 30;
  memory->used = 0;
  memory->free = memory->total;
  return SUCCESS;
}

typedef struct {
  unsigned int gpu, memory;
} utilization_t;

int nvmlDeviceGetUtilizationRates(void* device, utilization_t* utilization) {
  int i = index_of(device);
  if (i < 0) return INVALID_ARGUMENT;
  state_t s = read_state();
  if (s.lost[i]) return GPU_IS_LOST;
  utilization->gpu = (unsigned int)s.util[i];
  utilization->memory = 0;
  return SUCCESS;
}

static char event_set;

int nvmlEventSetCreate(void** set) {
  *set = &event_set;
  return SUCCESS;
}

int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void* set) {
  if (index_of(device) < 0 || set != &event_set) return INVALID_ARGUMENT;
  return types & 0x8 ? SUCCESS : NOT_SUPPORTED;
}

int nvmlEventSetWait_v2(void* set, event_data_t* data, unsigned int timeout_ms) {
  (void)timeout_ms;
  state_t s = read_state();
  if (set != &event_set || xids_delivered >= s.xids) return TIMEOUT;
  memset(data, 0, sizeof *data);
  data->device = &devices[s.xid_gpu[xids_delivered]];
  data->event_type = 0x8;
  data->event_data = s.xid[xids_delivered];
  ++xids_delivered;
  return SUCCESS;
}

int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type, unsigned long long* count) {
  int i = index_of(device);
  if (i < 0) return INVALID_ARGUMENT;
  state_t s = read_state();
  if (s.lost[i]) return GPU_IS_LOST;
  *count = error_type == 1 && counter_type == 0 ? s.ecc[i] : 0;
  return SUCCESS;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void* device, int* pending) {
  int i = index_of(device);
  if (i < 0) return INVALID_ARGUMENT;
  *pending = read_state().retired[i];
  return SUCCESS;
}

int nvmlDeviceGetRemappedRows(void* device, unsigned int* corrected, unsigned int* uncorrected, unsigned int* pending,
                              unsigned int* failed) {
  int i = index_of(device);
  if (i < 0) return INVALID_ARGUMENT;
  state_t s = read_state();
  *corrected = 0;
  *uncorrected = 0;
  *pending = (unsigned int)s.remap_pending[i];
  *failed = (unsigned int)s.remap_failed[i];
  return SUCCESS;
}
