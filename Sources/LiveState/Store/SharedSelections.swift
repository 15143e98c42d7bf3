import DisplayRules

/// Rule selections that many locations share, kept once and numbered: a location holds a
/// 4-byte number where a selection takes 24 bytes (at a million locations, 20 MB). Used
/// for the rules each location's address leaves out (``RuleEngine/outOfScope(_:)``),
/// which takes few distinct values: the `where` criteria of a venue's rules name a few
/// buildings, floors or rooms.
struct SharedSelections {
    private var selections: [RuleSelection] = []
    private var numbers: [RuleSelection: UInt32] = [:]
    /// The last one numbered: neighbouring locations (a restore reads them in address
    /// order) tend to share it.
    private var last: (selection: RuleSelection, number: UInt32)?

    /// The number of `selection`, from 1 (0 stands for none).
    mutating func number(of selection: RuleSelection) -> UInt32 {
        if let last, last.selection == selection { return last.number }
        let number: UInt32
        if let known = numbers[selection] {
            number = known
        } else {
            selections.append(selection)
            number = UInt32(selections.count)
            numbers[selection] = number
        }
        last = (selection, number)
        return number
    }

    /// The selection with this number (from 1).
    subscript(number: UInt32) -> RuleSelection { selections[Int(number) - 1] }

    /// Forgets every selection (the rules changed; the numbers held must be forgotten too).
    mutating func removeAll() {
        selections.removeAll()
        numbers.removeAll()
        last = nil
    }
}
