import Foundation
import LiveState
import LiveTopics
import NIOCore
import Synchronization

/// A viewer's frames: its mailbox, and the async sequence that reads it.
extension EventHub {
    /// The frames waiting for a viewer, as an async sequence that ends when the viewer is
    /// dropped or ended (after what was waiting) or when the task reading it is cancelled.
    public struct Frames: AsyncSequence, Sendable {
        let mailbox: Mailbox

        public func makeAsyncIterator() -> Iterator { Iterator(mailbox: mailbox) }

        public struct Iterator: AsyncIteratorProtocol {
            let mailbox: Mailbox
            var doorbell: AsyncStream<Void>.Iterator

            init(mailbox: Mailbox) {
                self.mailbox = mailbox
                doorbell = mailbox.doorbell.makeAsyncIterator()
            }

            public mutating func next() async -> ByteBuffer? {
                while true {
                    switch mailbox.take() {
                    case .bytes(let bytes): return bytes
                    case .ended: return nil
                    case .empty:
                        // Rung after every put; ends with the mailbox or the reader's task.
                        guard await doorbell.next() != nil else { return mailbox.takeRest() }
                    }
                }
            }
        }
    }

    /// One viewer's waiting frames, bounded by count: a put beyond ``EventHub/viewerBuffer``
    /// frames fails, and the hub drops the viewer.
    final class Mailbox: Sendable {
        enum Taken { case bytes(ByteBuffer), empty, ended }

        private struct Box {
            var bytes = ByteBuffer()
            var frames = 0
            var ended = false
        }

        private let box = Mutex(Box())
        let doorbell: AsyncStream<Void>
        private let ring: AsyncStream<Void>.Continuation
        let capacity: Int

        init(capacity: Int) {
            self.capacity = capacity
            (doorbell, ring) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        }

        /// Adds a frame; `false` when the viewer already has `capacity` waiting (or ended).
        func put(_ frame: ByteBuffer) -> Bool {
            let kept = box.withLock { box -> Bool in
                guard !box.ended, box.frames < capacity else { return false }
                var frame = frame
                box.bytes.writeBuffer(&frame)
                box.frames += 1
                return true
            }
            if kept { ring.yield() }
            return kept
        }

        func take() -> Taken {
            box.withLock { box in
                if box.frames > 0 {
                    defer {
                        box.bytes = ByteBuffer()
                        box.frames = 0
                    }
                    return .bytes(box.bytes)
                }
                return box.ended ? .ended : .empty
            }
        }

        /// What is left once the doorbell ended (the reader was cancelled): nothing more.
        func takeRest() -> ByteBuffer? {
            if case .bytes(let bytes) = take() { return bytes }
            return nil
        }

        /// No more frames; the reader gets what waits, then the end.
        func end() {
            box.withLock { $0.ended = true }
            ring.yield()
        }

        /// Calls `handler` when the reader's task is cancelled while it waits (a reader that
        /// stops otherwise calls ``EventHub/end(_:)``).
        func onTermination(_ handler: @escaping @Sendable () -> Void) {
            ring.onTermination = { _ in handler() }
        }
    }
}
