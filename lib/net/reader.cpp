#include "net/reader.hpp"

#include <hiredis/read.h>

#include <new>

namespace redlock::net {

using detail::Reply;

// hiredis calls these while it parses. A task without a parent is a top-level reply: it is built
// in the reader's one reused value. A task with a parent is an element of the array its parent
// built, whose element vector was sized when the array was created, so the address is stable.
struct ReaderHooks {
  static Reader& owner(const redisReadTask* t) { return *static_cast<Reader*>(t->privdata); }

  static Reply* slot(const redisReadTask* t) {
    if (t->parent == nullptr) {
      Reader& r = owner(t);
      r.top_.clear();
      r.elements_ = 0;
      return &r.top_;
    }
    auto* parent = static_cast<Reply*>(t->parent->obj);
    auto idx = static_cast<std::size_t>(t->idx);
    if (parent == nullptr || idx >= parent->elements.size()) return nullptr;
    return &parent->elements[idx];
  }

  static void* create_string(const redisReadTask* t, char* s, std::size_t len) {
    Reply* r = slot(t);
    if (r == nullptr) return nullptr;
    switch (t->type) {
      case REDIS_REPLY_ERROR:
        r->type = Reply::Type::error;
        break;
      case REDIS_REPLY_STATUS:
        r->type = Reply::Type::status;
        break;
      default:
        r->type = Reply::Type::string;
        break;
    }
    r->str.assign(s, len);
    return r;
  }
  static void* create_array(const redisReadTask* t, int elements) {
    Reply* r = slot(t);
    if (r == nullptr) return nullptr;
    Reader& owner_reader = owner(t);
    owner_reader.elements_ += elements;
    if (elements < 0 || elements > Reader::max_elements) {
      owner_reader.refusal_ = "protocol error: a reply of " + std::to_string(elements) +
                              " elements (at most " + std::to_string(Reader::max_elements) + ")";
      return nullptr;
    }
    if (owner_reader.elements_ > Reader::max_elements) {
      owner_reader.refusal_ = "protocol error: more than " + std::to_string(Reader::max_elements) +
                              " elements in nested arrays of one reply";
      return nullptr;
    }
    r->type = Reply::Type::array;
    r->elements.resize(static_cast<std::size_t>(elements));
    return r;
  }
  static void* create_integer(const redisReadTask* t, long long v) {
    Reply* r = slot(t);
    if (r == nullptr) return nullptr;
    r->type = Reply::Type::integer;
    r->integer = v;
    return r;
  }
  static void* create_nil(const redisReadTask* t) {
    Reply* r = slot(t);
    if (r == nullptr) return nullptr;
    r->type = Reply::Type::nil;
    return r;
  }
  // hiredis frees only top-level objects (after an error, or when the reader is freed); the
  // elements belong to their parent.
  static void free_object(void*) {}

  static redisReplyObjectFunctions functions;
};

redisReplyObjectFunctions ReaderHooks::functions = {
    &ReaderHooks::create_string, &ReaderHooks::create_array, &ReaderHooks::create_integer,
    &ReaderHooks::create_nil, &ReaderHooks::free_object};

Reader::Reader() { reset(); }

Reader::~Reader() {
  if (r_ != nullptr) redisReaderFree(r_);
}

void Reader::reset() {
  if (r_ != nullptr) redisReaderFree(r_);
  r_ = redisReaderCreateWithFunctions(&ReaderHooks::functions);
  if (r_ == nullptr) throw std::bad_alloc();
  r_->privdata = this;
  top_.clear();
  elements_ = 0;
  error_.clear();
  refusal_.clear();
}

bool Reader::feed(const char* data, std::size_t len) {
  if (!error_.empty()) return false;
  if (r_->len - r_->pos + len > max_pending_bytes) {
    error_ = "protocol error: more than " + std::to_string(max_pending_bytes >> 20) +
             " MiB of an unfinished reply";
    return false;
  }
  if (redisReaderFeed(r_, data, len) != REDIS_OK) {
    error_ = r_->errstr[0] != '\0' ? r_->errstr : "reader error";
    return false;
  }
  return true;
}

Reader::Next Reader::next() {
  if (!error_.empty()) return Next::error;
  void* obj = nullptr;
  if (redisReaderGetReply(r_, &obj) != REDIS_OK) {
    error_ = !refusal_.empty()
                 ? refusal_
                 : (r_->errstr[0] != '\0' ? std::string(r_->errstr) : "protocol error");
    return Next::error;
  }
  return obj == nullptr ? Next::more : Next::reply;
}

}  // namespace redlock::net
