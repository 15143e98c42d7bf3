extension Publisher {
    /// Why ``drain()`` stopped.
    enum Drained: Equatable {
        /// Nothing waits.
        case empty
        /// The window is full: an acknowledgement makes room.
        case windowFull
        /// Not connected: what waits leaves after the next connection.
        case disconnected
        /// The QoS 0 batch bound: call again.
        case more
    }
}
