/* A tiny driver for the core's tests of its driver boundary: just enough of
 * torchplug/driver.h for a client to be opened, with compile-time switches for
 * what the core must refuse with a clear message:
 *   TINY_MAJOR=<n>        the interface major version it claims (default TPD_API_MAJOR)
 *   TINY_FAIL_INIT        client_create fails
 * Every other table member is NULL: the core calls none before it accepts a driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torchplug/driver.h"

#ifndef TINY_MAJOR
#define TINY_MAJOR TPD_API_MAJOR
#endif

struct TPD_Error {
  TPD_ErrorCode code;
  char message[256];
};

static TPD_Error* make_error(TPD_ErrorCode code, const char* message) {
  TPD_Error* error = (TPD_Error*)calloc(1, sizeof(TPD_Error));
  error->code = code;
  snprintf(error->message, sizeof error->message, "%s", message);
  return error;
}

static void error_destroy(TPD_Error_Destroy_Args* args) { free(args->error); }

static void error_message(TPD_Error_Message_Args* args) {
  args->message = args->error->message;
  args->message_size = strlen(args->error->message);
}

static TPD_Error* error_get_code(TPD_Error_GetCode_Args* args) {
  args->code = args->error->code;
  return NULL;
}

static int the_client;

static TPD_Error* client_create(TPD_Client_Create_Args* args) {
#ifdef TINY_FAIL_INIT
  (void)args;
  return make_error(TPD_UNAVAILABLE, "tiny driver: no device found on this machine");
#else
  args->client = (TPD_Client*)&the_client;
  return NULL;
#endif
}

static TPD_Error* client_device_count(TPD_Client_DeviceCount_Args* args) {
  args->device_count = 1;
  return NULL;
}

static TPD_Error* device_get_properties(TPD_Device_GetProperties_Args* args) {
  TPD_DeviceProperties* properties = args->properties;
  snprintf(properties->name, sizeof properties->name, "tiny device");
  properties->total_memory = 1 << 20;
  properties->capabilities = TPD_CAPABILITY_HOST_ADDRESSABLE_MEMORY;
  properties->stream_priority_greatest = 0;
  properties->stream_priority_least = 0;
  properties->memory_alignment = 64;
  return NULL;
}

static TPD_Api api;

__attribute__((visibility("default"))) const TPD_Api* TPD_GetApi(void) {
  api.struct_size = TPD_Api_STRUCT_SIZE;
  api.api_version.major = TINY_MAJOR;
  api.api_version.minor = 0;
  api.driver_name = "tiny test driver";
  api.driver_version = "0.0";
  api.error_destroy = error_destroy;
  api.error_message = error_message;
  api.error_get_code = error_get_code;
  api.client_create = client_create;
  api.client_device_count = client_device_count;
  api.device_get_properties = device_get_properties;
  return &api;
}
