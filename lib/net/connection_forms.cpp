// The forms a release or extend goes out in (Request::natives), per connection: which one is
// picked, and what is done with the answer to a native form (Connection::send, handle_reply).
#include "core/server_text.hpp"
#include "net/connection.hpp"

namespace redlock::net {

std::shared_ptr<const Request> Connection::form_of(
    const std::shared_ptr<const Request>& req) const {
  if (req->native_kind == detail::NativeKind::none) return req;
  auto form = detail::chosen_form(req->native_kind, caps_, settings_.commands);
  // Forced native before the probe has answered (a fresh client's first command): the native
  // command at once. A server without it refuses it without running anything, and by then the
  // probe has answered (it went first): see handle_reply.
  if (!form && !caps_.probed && settings_.commands == Options::Commands::native) {
    form = req->native_kind == detail::NativeKind::extend ? detail::NativeForm::set_ifeq
                                                          : detail::NativeForm::delifeq;
  }
  return form ? Request::native(req, *form) : req;
}

// Sends `req` in place of the call `f` was (it did not run), with f's deadline, delivery state
// and sink (still exactly one on_result() and one on_done()).
bool Connection::resend_instead(InFlight& f, const std::shared_ptr<const Request>& req) {
  out_ += req->wire;
  queue(req, *f.sink, f.tag, f.sent, f.deadline, f.delivered, false, f.handshake);
  if (f.handshake) --handshake_left_;  // counted again for the new one
  return true;
}

// An answer to a native form, or to a script call where the server turned out to refuse
// scripts: true when it was dealt with here (translated and delivered, or sent again in the form
// the server runs); false: handle_reply() goes on with it.
bool Connection::handle_form_reply(InFlight& f, const detail::Reply& reply,
                                   BootClock::time_point at) {
  if (f.script->form) {
    const auto form = *f.script->form;
    if (detail::refuses_native(reply)) {
      // The server does not run the native command (an old proxy in front of a new server, an
      // ACL without it), so it did not run: the script call it stands for goes instead. That is
      // a release or an extend of our own token, safe to run behind what was sent since
      // (core/scripts.hpp, safe_to_run_late). This connection picks the form no more.
      const bool probed = caps_.probed;
      bool& has = form == detail::NativeForm::delifeq      ? caps_.delifeq
                  : form == detail::NativeForm::delex_ifeq ? caps_.delex_ifeq
                                                           : caps_.set_ifeq;
      const bool claimed = probed && has;  // (else: sent before the probe answered)
      if (probed) has = false;
      const auto script = Request::script_of(f.script);
      const auto instead = probed ? form_of(script) : script;
      if (instead == script) {
        auto why = detail::cannot_run(script->command, script->native_kind, caps_,
                                      settings_.commands, settings_.name);
        if (!why && settings_.commands == Options::Commands::native) {
          // Sent before the probe answered, and the probe could not be read (no +command).
          why = std::string(detail::cannot_run_prefix) + settings_.name + " refused " +
                std::string(detail::name(form)) +
                " (commands=native): " + detail::server_text(reply.str);
        }
        if (why) {
          const detail::Reply error{detail::Reply::Type::error, 0, std::move(*why), {}};
          deliver_reply(f, error, at);
          return true;
        }
      }
      resend_instead(f, instead);
      if (claimed) listener_.on_native_refused(*this, form, reply);
      return true;
    }
    if (form == detail::NativeForm::set_ifeq) {
      detail::Reply as_script = reply;
      detail::to_script_reply(form, as_script);
      deliver_reply(f, as_script, at);
      return true;
    }
  }
  // A script call sent before this connection's probe was answered, to a server that turned out
  // to refuse scripts: its native form instead where there is one, else the reason it cannot run.
  if (f.script->command.script && !f.retried && detail::refuses_native(reply) && caps_.probed &&
      !caps_.scripts) {
    const auto instead = form_of(f.script);
    if (instead != f.script) {
      resend_instead(f, instead);
      return true;
    }
    if (auto why = detail::cannot_run(f.script->command, f.script->native_kind, caps_,
                                      settings_.commands, settings_.name)) {
      const detail::Reply error{detail::Reply::Type::error, 0, std::move(*why), {}};
      deliver_reply(f, error, at);
      return true;
    }
  }
  return false;
}

}  // namespace redlock::net
