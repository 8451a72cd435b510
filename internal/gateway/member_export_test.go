package gateway

// MemberGeneration returns the consumer-group generation that g's member
// of group and topic last joined, or -1 when g has no member of them or
// it has not joined yet: a test counts the group's rebalances by it.
func MemberGeneration(g *Gateway, group, topic string) int32 {
	g.membersMu.Lock()
	m := g.members[memberKey{group, topic}]
	g.membersMu.Unlock()
	if m == nil {
		return -1
	}
	_, gen := m.cl.GroupMetadata()
	return gen
}
