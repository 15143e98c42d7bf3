import LiveTopics
import Testing

@Suite("Built-in domains")
struct BuiltInDomainTests {
    @Test("the registry lists the domains and properties of docs/protocol.md, \"The payload\"", arguments: [
        (BuiltInDomain.occupancy, ["nrOfPeople", "capacity"]), (.availability, ["available"]),
        (.position, ["latitude", "longitude", "floorIndex"]), (.temperature, ["temperature"]), (.co2, ["co2Level"]),
        (.humidity, ["relativeHumidity"]), (.count, ["count"]),
    ])
    func properties(domain: BuiltInDomain, names: [String]) {
        #expect(domain.propertyNames == names)
    }

    @Test("the summaries' people and capacity are properties of the headcount domain")
    func headcount() {
        #expect(BuiltInDomain.headcount.properties.contains(BuiltInDomain.people))
        #expect(BuiltInDomain.headcount.properties.contains(BuiltInDomain.capacity))
    }

    @Test("a built-in property is read and written by its registry entry")
    func typedAccess() {
        var properties: LiveProperties = ["nrOfPeople": "3"]
        properties[DomainProperty.capacity] = "8"
        #expect(properties["capacity"] == "8")
        #expect(properties.int(.nrOfPeople) == 3)
        #expect(properties.bool(.available) == nil)
    }
}
