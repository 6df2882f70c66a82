#include "server/generation_response.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "server/api_error.h"
#include "server/client_connection.h"
#include "server/http_response.h"

namespace mlaserve::server {

namespace {

// nginx's "client closed request": logged and counted, never seen by the client.
constexpr int kClientClosedRequest = 499;
constexpr std::chrono::milliseconds kStreamPollInterval{50};

// Sends the events of one streaming response; called repeatedly by cpp-httplib on the
// connection's worker thread until it calls sink.done() or returns false.
class EventStream {
 public:
  EventStream(ServerContext& context, std::unique_ptr<GenerationBatch> batch,
              std::shared_ptr<const GenerationFormat> format, ClientConnection client)
      : context_(context), batch_(std::move(batch)), format_(std::move(format)), client_(client) {
    context_.open_streams += 1;
  }
  ~EventStream() { context_.open_streams -= 1; }
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  // cpp-httplib calls this outside its handler try-block: an exception would end the process.
  bool pump(httplib::DataSink& sink) {
    try {
      return pump_events(sink);
    } catch (const std::exception& error) {
      spdlog::error("stream failed: {}", error.what());
      batch_->abort_unfinished("stream failed");
      return finish(sink, format_->stream_error(server_error(error.what())));
    }
  }

 private:
  bool pump_events(httplib::DataSink& sink) {
    if (!started_) {
      started_ = true;
      if (!write_all(sink, format_->stream_start(*batch_))) return give_up("client disconnected");
    } else {
      batch_->wait_and_apply(kStreamPollInterval);
    }
    if (context_.stopping) return give_up("server stopping");
    if (client_.closed()) return give_up("client disconnected");
    if (!write_updates(sink)) return give_up("client disconnected");
    if (const ChoiceState* failed = batch_->first_error()) {
      batch_->abort_unfinished("another choice failed");
      return finish(sink, format_->stream_error(server_error(failed->finish()->message)));
    }
    if (batch_->all_finished()) return finish(sink, format_->stream_end(*batch_));
    return true;
  }

  bool write_updates(httplib::DataSink& sink) {
    for (size_t i = 0; i < batch_->choices().size(); ++i) {
      ChoiceState& choice = batch_->choices()[i];
      ChoiceState::Update update = choice.take_update();
      // An engine error is reported by its own event after the updates; the text before it
      // still goes out.
      if (update.finish && update.finish->kind == FinishKind::Error) update.finish = nullptr;
      if (update.empty()) continue;
      if (!write_all(sink, format_->stream_update(*batch_, i, update))) return false;
    }
    return true;
  }

  bool finish(httplib::DataSink& sink, const std::vector<SseEvent>& last_events) {
    if (!write_all(sink, last_events) || !write(sink, std::string(format_->stream_terminator()))) {
      return give_up("client disconnected");
    }
    sink.done();
    return true;
  }

  bool write_all(httplib::DataSink& sink, const std::vector<SseEvent>& events) {
    for (const SseEvent& event : events) {
      if (!write(sink, sse_event(event))) return false;
    }
    return true;
  }

  static bool write(httplib::DataSink& sink, const std::string& data) {
    return sink.write(data.data(), data.size());
  }

  bool give_up(const char* why) {
    spdlog::info("stream ended early ({}); aborting its engine requests", why);
    batch_->abort_unfinished(why);
    return false;
  }

  ServerContext& context_;
  std::unique_ptr<GenerationBatch> batch_;
  std::shared_ptr<const GenerationFormat> format_;
  ClientConnection client_;
  bool started_ = false;
};

}  // namespace

bool handle_wait_result(WaitResult result, httplib::Response& response) {
  switch (result) {
    case WaitResult::Done:
      return true;
    case WaitResult::ClientGone:
      spdlog::info("client disconnected while waiting; aborting its engine requests");
      response.status = kClientClosedRequest;
      return false;
    case WaitResult::ServerStopping:
      throw ApiError(503, "The server is shutting down", "server_error");
  }
  return false;
}

void respond_with_generation(ServerContext& context, const httplib::Request& request,
                             httplib::Response& response, std::unique_ptr<GenerationBatch> batch,
                             std::shared_ptr<const GenerationFormat> format, bool stream) {
  const ClientConnection client = ClientConnection::of(request);
  GenerationBatch& waited = *batch;
  const auto ready = [&] { return stream ? waited.all_started() : waited.all_finished(); };
  if (!handle_wait_result(waited.wait_until(ready, client), response)) return;
  // A request the engine rejects gets an error status even when streaming; one that fails
  // after generating tokens streams them and then an error event.
  const ChoiceState* failed = waited.first_error();
  if (failed && (!stream || failed->completion_tokens() == 0)) {
    const Finish& finish = *failed->finish();
    throw finish.client_error ? invalid_request(finish.message) : server_error(finish.message);
  }
  if (!stream) {
    send_json(response, format->response(waited));
    return;
  }
  auto events = std::make_shared<EventStream>(context, std::move(batch), std::move(format), client);
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies must not buffer the stream
  response.set_chunked_content_provider(
      "text/event-stream",
      [events](size_t, httplib::DataSink& sink) { return events->pump(sink); });
}

}  // namespace mlaserve::server
