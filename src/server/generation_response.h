// Runs a submitted GenerationBatch to its response. Non-streaming: the handler thread waits
// (watching the client connection) and sends one JSON body. Streaming: it waits until every
// choice has heard from the engine, so that a request the engine rejects still gets an error
// status, then streams server-sent events; a client that goes away aborts the engine requests.
#pragma once

#include <httplib.h>

#include <memory>

#include "server/generation_batch.h"
#include "server/generation_format.h"
#include "server/server_context.h"

namespace mlaserve::server {

// Turns a wait that ended early into its response: 499 (logged only) when the client left,
// 503 when the server is stopping. Returns true if the wait completed.
bool handle_wait_result(WaitResult result, httplib::Response& response);

void respond_with_generation(ServerContext& context, const httplib::Request& request,
                             httplib::Response& response, std::unique_ptr<GenerationBatch> batch,
                             std::shared_ptr<const GenerationFormat> format, bool stream);

}  // namespace mlaserve::server
