/*
 * The torchplug driver interface: how the core reaches a device runtime.
 *
 * A driver is a shared library that exports one C function,
 *
 *     const TPD_Api* TPD_GetApi(void);
 *
 * returning a table of function pointers. The core (the only code that knows
 * torch) calls the device through this table alone; a driver includes no torch
 * header and links neither libtorch nor libpython, so one driver binary serves
 * every torch release the core is built for. It can be written in C, C++ or
 * Rust over a vendor's runtime; torchplug's simulator is one (libtorchplug_simulator).
 *
 * Versioning. `api_version.major` must equal the core's TPD_API_MAJOR; minor
 * versions only append members to the table and to argument structs. Every
 * argument struct starts with `struct_size` (the caller sets it to
 * TPD_<Struct>_STRUCT_SIZE of its header) so a driver built against an older
 * or newer header knows which members the caller has: a driver reads a member
 * only when `struct_size` covers it, and writes outputs only within it.
 * Optional features are extensions, found at run time by walking
 * `TPD_Api.extension_start` (a chain of TPD_ExtensionBase).
 *
 * Errors. Every function returns NULL on success or a TPD_Error the caller
 * owns: it reads the code and message, then destroys it with error_destroy.
 *
 * Threads. Every function may be called from any thread, concurrently, except
 * that a handle must not be destroyed while another thread uses it. After its
 * destroy call, a driver answers a handle with TPD_INVALID_HANDLE (it never
 * dereferences a handle it does not know), as it does a handle of another client.
 *
 * Sizes and pointers. A size of 0 makes memset, copies and host allocation do
 * nothing (and allocations return NULL). memset and copies accept any address
 * inside an allocation (allocation + offset); free takes the allocation's start.
 * Enums are int-sized, as the C ABI of every supported platform makes them.
 */
#ifndef TORCHPLUG_DRIVER_H_
#define TORCHPLUG_DRIVER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPD_API_MAJOR 1
#define TPD_API_MINOR 2
#define TPD_ENTRY_POINT "TPD_GetApi"

/* The size of a struct up to and including `member`: what a caller of this
 * header puts in struct_size, and what a driver compares it with before
 * reading a member appended in a later minor version. */
#define TPD_STRUCT_SIZE(type, member) (offsetof(type, member) + sizeof(((type*)0)->member))

/* ---------------------------------------------------------------- errors */

typedef enum {
  TPD_SUCCESS = 0,
  TPD_INVALID_ARGUMENT = 1,  /* a NULL where a value is needed, a bad size or flag */
  TPD_INVALID_DEVICE = 2,    /* a device index outside [0, device_count) */
  TPD_INVALID_HANDLE = 3,    /* a stream, event or pointer this driver did not hand out, or destroyed */
  TPD_OUT_OF_MEMORY = 4,     /* the device (or pinned host memory) cannot hold the allocation */
  TPD_NOT_READY = 5,         /* event_elapsed_time: an event has not completed yet (queries answer
                              * through their out flag and succeed instead) */
  TPD_UNSUPPORTED = 6,       /* not offered by this driver or device */
  TPD_VERSION_MISMATCH = 7,  /* a struct or major version this driver cannot serve */
  TPD_EXECUTION_FAILED = 8,  /* work on a stream failed: a kernel fault, a failed host function */
  TPD_UNAVAILABLE = 9,       /* the device cannot be used here (e.g. in a child forked after use) */
  TPD_INTERNAL = 10,         /* a driver defect */
} TPD_ErrorCode;

typedef struct TPD_Error TPD_Error;

typedef struct {
  size_t struct_size;
  TPD_Error* error;
} TPD_Error_Destroy_Args;
#define TPD_Error_Destroy_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Error_Destroy_Args, error)

typedef struct {
  size_t struct_size;
  const TPD_Error* error;
  const char* message; /* out: NUL-terminated, valid until the error is destroyed */
  size_t message_size; /* out: without the NUL */
} TPD_Error_Message_Args;
#define TPD_Error_Message_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Error_Message_Args, message_size)

typedef struct {
  size_t struct_size;
  const TPD_Error* error;
  TPD_ErrorCode code; /* out */
} TPD_Error_GetCode_Args;
#define TPD_Error_GetCode_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Error_GetCode_Args, code)

/* --------------------------------------------------------------- clients */

/* A client is one backend's view of the driver: its own devices, memory,
 * streams and events. A driver serving several backends in one process (the
 * simulator serves foo, npu and hpu) keeps their devices apart by name; clients
 * created with the same name share devices and memory, but each client's
 * handles are its own. A client handle the driver did not hand out, or one
 * destroyed, is TPD_INVALID_HANDLE. */
typedef struct TPD_Client TPD_Client;
typedef struct TPD_Stream TPD_Stream;
typedef struct TPD_Event TPD_Event;

/* The simulator takes one option, "hidden_capabilities=<bits>": TPD_CAPABILITY_*
 * bits (decimal) its devices do not report to this client, to test a caller
 * against a driver without them. */
typedef struct {
  size_t struct_size;
  const char* name;    /* the backend's device name ("npu"); the simulator keys its devices by it */
  const char* options; /* driver-specific "key=value;key=value" settings, or NULL */
  TPD_Client* client;  /* out */
} TPD_Client_Create_Args;
#define TPD_Client_Create_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Client_Create_Args, client)

/* Waits for the client's queued work, destroys its streams and events, and
 * releases memory still allocated through it. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
} TPD_Client_Destroy_Args;
#define TPD_Client_Destroy_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Client_Destroy_Args, client)

/* ---------------------------------------------------------------- devices */

/* Capability flags of TPD_DeviceProperties.capabilities. */
#define TPD_CAPABILITY_HOST_ADDRESSABLE_MEMORY (1u << 0) /* the host may read and write device pointers */
#define TPD_CAPABILITY_PEER_COPY (1u << 1)               /* copies between two devices of the client */
#define TPD_CAPABILITY_TIMING_EVENTS (1u << 2)           /* event_elapsed_time works */
#define TPD_CAPABILITY_STREAM_PRIORITIES (1u << 3)       /* priorities other than 0 take effect */

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device_count; /* out */
} TPD_Client_DeviceCount_Args;
#define TPD_Client_DeviceCount_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Client_DeviceCount_Args, device_count)

typedef struct {
  size_t struct_size;
  char name[64];                 /* NUL-terminated */
  uint64_t total_memory;         /* bytes; equal to memory_get_info's total_bytes */
  uint64_t capabilities;         /* TPD_CAPABILITY_* */
  int stream_priority_greatest;  /* the most urgent priority (the lowest number, as in CUDA);
                                  * 0 without TPD_CAPABILITY_STREAM_PRIORITIES */
  int stream_priority_least;     /* the default priority, 0 (a field so a later minor may change it) */
  uint32_t memory_alignment;     /* every allocation's address is a multiple of it */
} TPD_DeviceProperties;
#define TPD_DeviceProperties_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_DeviceProperties, memory_alignment)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  TPD_DeviceProperties* properties; /* out: the caller sets properties->struct_size */
} TPD_Device_GetProperties_Args;
#define TPD_Device_GetProperties_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Device_GetProperties_Args, properties)

/* ----------------------------------------------------------------- memory */

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  size_t size;   /* bytes; 0 gives a NULL pointer and no error */
  void* pointer; /* out: a device address (host-dereferenceable only with HOST_ADDRESSABLE_MEMORY) */
} TPD_Memory_Allocate_Args;
#define TPD_Memory_Allocate_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Memory_Allocate_Args, pointer)

/* Frees device memory right away: the caller has made sure no queued work uses it. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  void* pointer; /* from memory_allocate; NULL is allowed */
} TPD_Memory_Free_Args;
#define TPD_Memory_Free_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Memory_Free_Args, pointer)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  uint64_t free_bytes;  /* out */
  uint64_t total_bytes; /* out */
} TPD_Memory_GetInfo_Args;
#define TPD_Memory_GetInfo_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Memory_GetInfo_Args, total_bytes)

/* Page-locked host memory the device copies from and to asynchronously. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  size_t size;
  void* pointer; /* out: a host address */
} TPD_HostMemory_Allocate_Args;
#define TPD_HostMemory_Allocate_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_HostMemory_Allocate_Args, pointer)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  void* pointer; /* from host_memory_allocate; NULL is allowed */
} TPD_HostMemory_Free_Args;
#define TPD_HostMemory_Free_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_HostMemory_Free_Args, pointer)

/* ---------------------------------------------------------------- streams */

/* A stream runs its work in order; work on different streams may overlap. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  int priority;       /* in [stream_priority_greatest, stream_priority_least]; 0 is the default */
  TPD_Stream* stream; /* out */
} TPD_Stream_Create_Args;
#define TPD_Stream_Create_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Stream_Create_Args, stream)

/* Waits for the stream's work, then destroys it. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
} TPD_Stream_Destroy_Args;
#define TPD_Stream_Destroy_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Stream_Destroy_Args, stream)

/* Also the argument of stream_synchronize and stream_wait_idle. A NULL stream
 * is TPD_INVALID_ARGUMENT in every function: there is no implicit default stream. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
  int idle;   /* out (stream_query): 1 when all work queued so far has finished */
  int failed; /* out (stream_query, stream_wait_idle): 1 when a failure of the stream is
               * pending, i.e. not reported yet (see TPD_HostFunction); answering does not
               * report or consume it */
} TPD_Stream_Query_Args;
#define TPD_Stream_Query_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Stream_Query_Args, failed)

/* Work queued on `stream` later waits until `event`'s captured work finished.
 * An event never recorded makes no wait. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
  TPD_Event* event;
} TPD_Stream_WaitEvent_Args;
#define TPD_Stream_WaitEvent_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Stream_WaitEvent_Args, event)

/* A host function runs on a driver thread in the stream's order; it must not
 * wait for its own stream. Returning non-zero fails the stream: `message`
 * (capacity `message_size`, at least 256 bytes) takes a NUL-terminated reason.
 * A failure is reported once: by the next stream_synchronize, or by
 * event_synchronize of an event recorded after it, whichever comes first (it
 * is then consumed). Work queued after the failure still runs; stream_query
 * and event_query keep answering whether work finished. */
typedef int (*TPD_HostFunction)(void* user_data, char* message, size_t message_size);

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
  TPD_HostFunction function;
  void* user_data;
} TPD_Stream_LaunchHostFunction_Args;
#define TPD_Stream_LaunchHostFunction_Args_STRUCT_SIZE \
  TPD_STRUCT_SIZE(TPD_Stream_LaunchHostFunction_Args, user_data)

/* ------------------------------------------------------------ memset/copy */

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
  void* pointer; /* device memory */
  int value;     /* the byte written: its low 8 bits */
  size_t size;
} TPD_Memory_SetAsync_Args;
#define TPD_Memory_SetAsync_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Memory_SetAsync_Args, size)

typedef enum {
  TPD_COPY_HOST_TO_DEVICE = 0,
  TPD_COPY_DEVICE_TO_HOST = 1,
  TPD_COPY_DEVICE_TO_DEVICE = 2, /* the same device, or peers with TPD_CAPABILITY_PEER_COPY */
} TPD_CopyKind;

/* Copies in `stream`'s order. Pageable host memory (not from
 * host_memory_allocate) as a source may be reused as soon as the call returns
 * (the driver copies or stages it first, as CUDA does); as a destination, and
 * pinned host memory either way, it must stay valid until the stream has run
 * the copy. A copy between two devices needs TPD_CAPABILITY_PEER_COPY, else
 * TPD_UNSUPPORTED. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
  void* destination;
  const void* source;
  size_t size;
  TPD_CopyKind kind;
} TPD_Memory_CopyAsync_Args;
#define TPD_Memory_CopyAsync_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Memory_CopyAsync_Args, kind)

/* ----------------------------------------------------------------- events */

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  int enable_timing;
  TPD_Event* event; /* out */
} TPD_Event_Create_Args;
#define TPD_Event_Create_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Event_Create_Args, event)

/* Also the argument of event_destroy and event_synchronize. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Event* event;
  int completed; /* out (event_query): 1 when the captured work finished, or never recorded */
} TPD_Event_Query_Args;
#define TPD_Event_Query_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Event_Query_Args, completed)

/* Captures the work queued on `stream` so far; recording again moves the mark. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Event* event;
  TPD_Stream* stream;
} TPD_Event_Record_Args;
#define TPD_Event_Record_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Event_Record_Args, stream)

/* Both events created with timing on a device with TPD_CAPABILITY_TIMING_EVENTS
 * (else TPD_UNSUPPORTED), recorded and completed (else TPD_NOT_READY). */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Event* start;
  TPD_Event* end;
  double milliseconds; /* out */
} TPD_Event_ElapsedTime_Args;
#define TPD_Event_ElapsedTime_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Event_ElapsedTime_Args, milliseconds)

/* ------------------------------------------------------------- extensions */

typedef enum {
  TPD_EXTENSION_IPC = 1,             /* TPD_IpcExtension: memory shared between processes */
  TPD_EXTENSION_PROFILER = 2,        /* TPD_ProfilerExtension: device timestamps */
  TPD_EXTENSION_GRAPH_CAPTURE = 3,   /* TPD_GraphCaptureExtension (1.2): record a stream's work, replay it */
  TPD_EXTENSION_KERNEL_MODULES = 4,  /* TPD_KernelModulesExtension (1.1): load device code, launch its functions */
  TPD_EXTENSION_SIMULATOR = 100,     /* TPD_SimulatorExtension: the simulator's own controls */
} TPD_ExtensionType;

/* The first member of every extension: `struct_size` is the whole extension's. */
typedef struct TPD_ExtensionBase {
  size_t struct_size;
  TPD_ExtensionType type;
  const struct TPD_ExtensionBase* next; /* NULL ends the chain */
} TPD_ExtensionBase;

/* IPC: device memory shared between processes, as CUDA IPC shares it.
 *
 * The owning process allocates memory that can be shared (ipc_allocate; memory
 * from memory_allocate need not be shareable, so the core moves what it shares
 * into such memory first), names it with a handle (ipc_get_handle): plain bytes
 * the owner sends by any means. Another process maps the memory with the handle
 * (ipc_open) and unmaps it (ipc_close); both see each other's writes. The core
 * orders the accesses (it synchronises before it hands a handle out).
 *
 * Lifetime, as in CUDA: the owner keeps its allocation, freed with memory_free,
 * until every receiver has closed it. ipc_open of a handle whose allocation was
 * freed, or whose owner exited, fails with TPD_INVALID_HANDLE (never a crash);
 * whether memory already opened stays valid after the owner freed it is the
 * driver's to say (the simulator's stays valid until the last process unmaps it).
 *
 * The simulator's handle: a memfd-backed allocation, named by the owner's pid,
 * the descriptor's number, and its inode (st_dev, st_ino) and size; ipc_open
 * opens /proc/<pid>/fd/<fd>, checks the inode and size (a descriptor number
 * reused for another file is refused), and maps it. No name exists in any file
 * system, so a crashed process leaves nothing behind: the kernel frees the
 * pages when the last descriptor and mapping go. Opening needs the rights to
 * read the owner's /proc/<pid>/fd (the same user, as for ptrace reading). */
#define TPD_IPC_HANDLE_SIZE 64

/* Device memory other processes can open: freed with memory_free, usable as
 * memory_allocate's (copies, memset) and counted against the device alike. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  size_t size;   /* bytes; 0 gives a NULL pointer and no error */
  void* pointer; /* out */
} TPD_Ipc_Allocate_Args;
#define TPD_Ipc_Allocate_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Ipc_Allocate_Args, pointer)

/* The handle of an allocation from ipc_allocate: the same bytes on every call.
 * TPD_INVALID_ARGUMENT for memory of memory_allocate (unless the driver can
 * share it too) or for an address inside an allocation rather than its start;
 * TPD_INVALID_HANDLE for memory this client did not allocate. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  void* pointer;                             /* the start of an allocation */
  unsigned char handle[TPD_IPC_HANDLE_SIZE]; /* out */
} TPD_Ipc_GetHandle_Args;
#define TPD_Ipc_GetHandle_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Ipc_GetHandle_Args, handle)

/* Maps the memory a handle names as device memory of `device` for this client
 * (copies, memset; not memory_free) until ipc_close. Each call maps it anew,
 * also in the owning process, and each mapping is closed once. Bytes that are
 * no handle of this driver are TPD_INVALID_ARGUMENT; a handle of memory freed,
 * or of a process gone, is TPD_INVALID_HANDLE. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  const unsigned char* handle; /* TPD_IPC_HANDLE_SIZE bytes from ipc_get_handle in any process */
  void* pointer;               /* out: mapped until ipc_close */
  size_t size;                 /* out: the allocation's size */
} TPD_Ipc_Open_Args;
#define TPD_Ipc_Open_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Ipc_Open_Args, size)

/* Unmaps memory from ipc_open: the caller has made sure no queued work uses it.
 * TPD_INVALID_HANDLE for a pointer ipc_open did not return, or closed already.
 * client_destroy closes what its client left open. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  void* pointer; /* from ipc_open */
} TPD_Ipc_Close_Args;
#define TPD_Ipc_Close_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Ipc_Close_Args, pointer)

typedef struct {
  TPD_ExtensionBase base;
  TPD_Error* (*ipc_allocate)(TPD_Ipc_Allocate_Args* args);
  TPD_Error* (*ipc_get_handle)(TPD_Ipc_GetHandle_Args* args);
  TPD_Error* (*ipc_open)(TPD_Ipc_Open_Args* args);
  TPD_Error* (*ipc_close)(TPD_Ipc_Close_Args* args);
} TPD_IpcExtension;
#define TPD_IpcExtension_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_IpcExtension, ipc_close)

/* Profiler: when an event completed, on the clock the host's profiler uses
 * (steady, nanoseconds), so device activity lines up with host activity. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Event* event; /* recorded with timing, completed */
  int64_t nanoseconds; /* out */
} TPD_Profiler_EventTimestamp_Args;
#define TPD_Profiler_EventTimestamp_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Profiler_EventTimestamp_Args, nanoseconds)

typedef struct {
  TPD_ExtensionBase base;
  TPD_Error* (*event_timestamp)(TPD_Profiler_EventTimestamp_Args* args);
} TPD_ProfilerExtension;
#define TPD_ProfilerExtension_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_ProfilerExtension, event_timestamp)

/* Kernel modules (interface 1.1): code the device loads and runs, as CUDA's
 * cuModuleLoadData, cuModuleGetFunction and cuLaunchKernel. A module belongs to
 * its client and serves every device of it. What an image holds depends on the
 * device; `image_format` names the format the driver loads, so a caller with
 * images for several devices hands each driver its own.
 *
 * module_load takes the image's bytes (the driver keeps what it needs before
 * it returns). module_unload forgets the module and its functions: later calls
 * with them fail with TPD_INVALID_HANDLE, while launches already queued still
 * run. kernel_launch queues the function on the stream with its arguments,
 * copied before it returns, and returns at once; a kernel that fails (the
 * device faults, the kernel reports failure) fails the stream, reported as
 * TPD_EXECUTION_FAILED by the next synchronising call, as a failed host
 * function is. A pointer argument must be NULL or device memory of the client:
 * a driver refuses others with TPD_INVALID_HANDLE before anything runs. */
typedef struct TPD_Module TPD_Module;
typedef struct TPD_Function TPD_Function;

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  const void* image;
  size_t image_size;
  TPD_Module* module; /* out */
} TPD_Module_Load_Args;
#define TPD_Module_Load_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Module_Load_Args, module)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Module* module;
} TPD_Module_Unload_Args;
#define TPD_Module_Unload_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Module_Unload_Args, module)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Module* module;
  const char* name;       /* the function's name in the image */
  TPD_Function* function; /* out */
} TPD_Module_GetFunction_Args;
#define TPD_Module_GetFunction_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Module_GetFunction_Args, function)

typedef enum {
  TPD_KERNEL_ARG_POINTER = 0, /* device memory of the client, or NULL */
  TPD_KERNEL_ARG_INT64 = 1,
  TPD_KERNEL_ARG_FLOAT64 = 2,
} TPD_KernelArgKind;

typedef union {
  void* pointer;
  int64_t int64;
  double float64;
} TPD_KernelValue;

typedef struct {
  TPD_KernelArgKind kind;
  TPD_KernelValue value; /* the member `kind` names */
} TPD_KernelArg;

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
  TPD_Function* function;
  const TPD_KernelArg* args;
  size_t arg_count;
} TPD_Kernel_Launch_Args;
#define TPD_Kernel_Launch_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Kernel_Launch_Args, arg_count)

typedef struct {
  TPD_ExtensionBase base;
  const char* image_format; /* e.g. TPD_KERNEL_FORMAT_HOST_ELF */
  TPD_Error* (*module_load)(TPD_Module_Load_Args* args);
  TPD_Error* (*module_unload)(TPD_Module_Unload_Args* args);
  TPD_Error* (*module_get_function)(TPD_Module_GetFunction_Args* args);
  TPD_Error* (*kernel_launch)(TPD_Kernel_Launch_Args* args);
} TPD_KernelModulesExtension;
#define TPD_KernelModulesExtension_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_KernelModulesExtension, kernel_launch)

/* The format of devices that run the host's own machine code (torchplug's
 * simulator, and the remote driver's device process): an ELF shared object
 * for the host's CPU whose libraries the dynamic loader finds (the system's,
 * or by its run path), whose functions are exported C symbols of type
 * TPD_HostElfKernel. A kernel runs on the stream's
 * thread with the launch's arguments; it returns 0, or non-zero after writing
 * a NUL-terminated message of at most `message_size` bytes, which fails the stream. */
#define TPD_KERNEL_FORMAT_HOST_ELF "torchplug-host-elf-1"
typedef int (*TPD_HostElfKernel)(const TPD_KernelArg* args, size_t arg_count, char* message, size_t message_size);

/* Graph capture (1.2): the work queued on a stream between begin_capture and
 * end_capture (copies, memsets, host functions, kernel launches, event
 * records and waits) is recorded into a graph instead of running, in its
 * order; graph_launch queues the recorded work again on a stream, as one
 * unit, as often as the caller likes. Host functions are recorded with their
 * user_data: the caller keeps it valid, and the function re-runnable, while
 * the graph lives. A capturing stream runs nothing: synchronizing it or
 * waiting for it fails with TPD_INVALID_ARGUMENT, as does beginning a capture
 * on a stream that is capturing already or ending one on a stream that is
 * not. Graphs stay valid after the stream that captured them is destroyed. */
typedef struct TPD_Graph TPD_Graph;

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
} TPD_Graph_BeginCapture_Args;
#define TPD_Graph_BeginCapture_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Graph_BeginCapture_Args, stream)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
  TPD_Graph* graph;    /* out */
  size_t work_count;   /* out: the work items recorded */
} TPD_Graph_EndCapture_Args;
#define TPD_Graph_EndCapture_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Graph_EndCapture_Args, work_count)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Graph* graph;
  TPD_Stream* stream; /* where the recorded work is queued; any stream of the client */
} TPD_Graph_Launch_Args;
#define TPD_Graph_Launch_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Graph_Launch_Args, stream)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Graph* graph; /* launches already queued still run */
} TPD_Graph_Destroy_Args;
#define TPD_Graph_Destroy_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Graph_Destroy_Args, graph)

typedef struct {
  TPD_ExtensionBase base;
  TPD_Error* (*begin_capture)(TPD_Graph_BeginCapture_Args* args);
  TPD_Error* (*end_capture)(TPD_Graph_EndCapture_Args* args);
  TPD_Error* (*graph_launch)(TPD_Graph_Launch_Args* args);
  TPD_Error* (*graph_destroy)(TPD_Graph_Destroy_Args* args);
} TPD_GraphCaptureExtension;
#define TPD_GraphCaptureExtension_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_GraphCaptureExtension, graph_destroy)

/* The simulator's controls: device count and capacity (before first use),
 * and fault injection for tests. Other drivers do not offer it. */
typedef enum {
  TPD_SIMULATOR_FAIL_ALLOCATIONS = 0, /* the next `count` allocations on the device fail as if full */
  TPD_SIMULATOR_FAIL_KERNELS = 1,     /* the next `count` host functions on the device fail while they run */
  TPD_SIMULATOR_FAIL_KERNEL_LAUNCHES = 2, /* the next `count` kernels the caller runs on the device fail:
                                           * take_kernel_fault answers 1 for each (host functions are
                                           * unaffected); the caller fails the kernel itself */
} TPD_SimulatorFault;

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device_count;
  uint64_t capacity_bytes; /* per device */
} TPD_Simulator_Configure_Args;
#define TPD_Simulator_Configure_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Simulator_Configure_Args, capacity_bytes)

typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  TPD_SimulatorFault fault;
  int count;
} TPD_Simulator_InjectFault_Args;
#define TPD_Simulator_InjectFault_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Simulator_InjectFault_Args, count)

/* Takes one TPD_SIMULATOR_FAIL_KERNEL_LAUNCHES fault of the device, if any is left. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  int taken; /* out: 1 when the kernel starting now must fail */
} TPD_Simulator_TakeKernelFault_Args;
#define TPD_Simulator_TakeKernelFault_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Simulator_TakeKernelFault_Args, taken)

/* Strict memory: device memory allocated while it is on is mapped
 * inaccessible to the host except inside an access window (open_access), so
 * host code that reads device memory directly faults at the access. One
 * setting for the whole process, every client. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int enable;  /* in: 1 turns strict memory on, 0 off, -1 leaves it */
  int enabled; /* out: the setting after the call */
} TPD_Simulator_StrictMemory_Args;
#define TPD_Simulator_StrictMemory_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Simulator_StrictMemory_Args, enabled)

/* An access window: the host may read and write the protected allocations
 * holding `pointers` until close_access; pointers outside protected memory
 * are ignored. Windows nest and may overlap; they are process-wide. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  const void* const* pointers; /* open_access */
  size_t pointer_count;        /* open_access */
  void* window;                /* out (open_access), in (close_access) */
} TPD_Simulator_Access_Args;
#define TPD_Simulator_Access_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Simulator_Access_Args, window)

/* Counts memory the simulator did not allocate (host memory the caller took
 * over as device memory) against a device's capacity and statistics, or
 * releases what was counted: TPD_OUT_OF_MEMORY when it does not fit. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  uint64_t bytes;
  int release; /* 0 adopts, 1 releases */
} TPD_Simulator_Adopt_Args;
#define TPD_Simulator_Adopt_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Simulator_Adopt_Args, release)

/* A device's memory statistics (every client of the name together). */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  int device;
  int reset_peak;             /* in: 1 sets the peak to the current use after reading */
  int initialized;            /* out: 1 once memory or a stream of the device's name was created */
  int64_t used_bytes;         /* out: held from the device now */
  int64_t peak_used_bytes;    /* out: high-water mark since the last reset */
  int64_t allocation_count;   /* out */
  int64_t free_count;         /* out */
  int64_t failed_allocations; /* out: capacity exceeded or injected */
} TPD_Simulator_Stats_Args;
#define TPD_Simulator_Stats_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Simulator_Stats_Args, failed_allocations)

/* Queues a sleep on the stream: work that takes `milliseconds` of device time. */
typedef struct {
  size_t struct_size;
  TPD_Client* client;
  TPD_Stream* stream;
  double milliseconds;
} TPD_Simulator_Sleep_Args;
#define TPD_Simulator_Sleep_Args_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Simulator_Sleep_Args, milliseconds)

typedef struct {
  TPD_ExtensionBase base;
  TPD_Error* (*configure)(TPD_Simulator_Configure_Args* args);
  TPD_Error* (*inject_fault)(TPD_Simulator_InjectFault_Args* args);
  TPD_Error* (*take_kernel_fault)(TPD_Simulator_TakeKernelFault_Args* args);
  TPD_Error* (*strict_memory)(TPD_Simulator_StrictMemory_Args* args);
  TPD_Error* (*open_access)(TPD_Simulator_Access_Args* args);
  TPD_Error* (*close_access)(TPD_Simulator_Access_Args* args);
  TPD_Error* (*adopt)(TPD_Simulator_Adopt_Args* args);
  TPD_Error* (*stats)(TPD_Simulator_Stats_Args* args);
  TPD_Error* (*sleep)(TPD_Simulator_Sleep_Args* args);
} TPD_SimulatorExtension;
#define TPD_SimulatorExtension_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_SimulatorExtension, sleep)

/* ------------------------------------------------------------------ table */

typedef struct {
  int major;
  int minor;
} TPD_ApiVersion;

typedef struct TPD_Api {
  size_t struct_size;
  const TPD_ExtensionBase* extension_start;
  TPD_ApiVersion api_version;
  const char* driver_name;    /* "torchplug simulator", or the vendor's */
  const char* driver_version; /* the driver's own release */

  void (*error_destroy)(TPD_Error_Destroy_Args* args);
  void (*error_message)(TPD_Error_Message_Args* args);
  TPD_Error* (*error_get_code)(TPD_Error_GetCode_Args* args);

  TPD_Error* (*client_create)(TPD_Client_Create_Args* args);
  TPD_Error* (*client_destroy)(TPD_Client_Destroy_Args* args);
  TPD_Error* (*client_device_count)(TPD_Client_DeviceCount_Args* args);
  TPD_Error* (*device_get_properties)(TPD_Device_GetProperties_Args* args);

  TPD_Error* (*memory_allocate)(TPD_Memory_Allocate_Args* args);
  TPD_Error* (*memory_free)(TPD_Memory_Free_Args* args);
  TPD_Error* (*memory_get_info)(TPD_Memory_GetInfo_Args* args);
  TPD_Error* (*host_memory_allocate)(TPD_HostMemory_Allocate_Args* args);
  TPD_Error* (*host_memory_free)(TPD_HostMemory_Free_Args* args);
  TPD_Error* (*memory_set_async)(TPD_Memory_SetAsync_Args* args);
  TPD_Error* (*memory_copy_async)(TPD_Memory_CopyAsync_Args* args);

  TPD_Error* (*stream_create)(TPD_Stream_Create_Args* args);
  TPD_Error* (*stream_destroy)(TPD_Stream_Destroy_Args* args);
  TPD_Error* (*stream_query)(TPD_Stream_Query_Args* args);
  TPD_Error* (*stream_synchronize)(TPD_Stream_Query_Args* args);
  TPD_Error* (*stream_wait_event)(TPD_Stream_WaitEvent_Args* args);
  TPD_Error* (*stream_launch_host_function)(TPD_Stream_LaunchHostFunction_Args* args);

  TPD_Error* (*event_create)(TPD_Event_Create_Args* args);
  TPD_Error* (*event_destroy)(TPD_Event_Query_Args* args);
  TPD_Error* (*event_record)(TPD_Event_Record_Args* args);
  TPD_Error* (*event_query)(TPD_Event_Query_Args* args);
  TPD_Error* (*event_synchronize)(TPD_Event_Query_Args* args);
  TPD_Error* (*event_elapsed_time)(TPD_Event_ElapsedTime_Args* args);

  /* Waits for the work queued on the stream so far, like stream_synchronize,
   * but reports no failure: a pending one stays for stream_synchronize (or an
   * event) to report, and `failed` says whether there is one. */
  TPD_Error* (*stream_wait_idle)(TPD_Stream_Query_Args* args);
} TPD_Api;
#define TPD_Api_STRUCT_SIZE TPD_STRUCT_SIZE(TPD_Api, stream_wait_idle)

/* The one symbol a driver exports. */
typedef const TPD_Api* (*TPD_GetApiFunction)(void);

#ifdef __cplusplus
}
#endif

#endif /* TORCHPLUG_DRIVER_H_ */
